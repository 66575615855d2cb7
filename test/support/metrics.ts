/**
 * Waits currently parked in the server at `baseUrl` (from its /metrics), by kind and delivery
 * (`poll` by default: blocking calls; `websocket`: open sockets; `persisted`: stored waits watched).
 */
export async function activeWaits(
  baseUrl: string,
  kind?: 'message' | 'request',
  delivery: 'poll' | 'websocket' | 'persisted' = 'poll',
): Promise<number> {
  const text = await (await fetch(new URL('/metrics', baseUrl))).text();
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^alcarta_active_waits\{([^}]*)\} (\d+)/.exec(line);
    if (m && m[1].includes(`delivery="${delivery}"`) && (!kind || m[1].includes(`kind="${kind}"`))) {
      total += Number(m[2]);
    }
  }
  return total;
}

/**
 * The value of the metric `name` of the server at `baseUrl` (from its /metrics): the sum of its
 * series whose labels include every one of `labels`; 0 when none is reported yet.
 */
export async function metricValue(baseUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(new URL('/metrics', baseUrl))).text();
  const wanted = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (m && m[1] === name && wanted.every((w) => (m[2] ?? '').split(',').includes(w))) total += Number(m[3]);
  }
  return total;
}
