/**
 * `fn` over every item with at most `limit` calls in flight, the next starting as soon as one ends;
 * answers the results in the items' order. A burst of hundreds of calls at once makes a server's
 * event-loop turns so long on a busy machine that its database pool's connect timeout expires
 * (503 `database_unavailable`); a bounded number in flight keeps the load concurrent without that.
 */
export async function mapInFlight<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
