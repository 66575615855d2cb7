/** A scrape waits at most this long for the database: /metrics must answer during an outage. */
const SCRAPE_QUERY_TIMEOUT_MS = 1500;

/** A scrape-time query cut off after SCRAPE_QUERY_TIMEOUT_MS (for the collectors of every module). */
export function withinTimeout<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('database query timed out')), SCRAPE_QUERY_TIMEOUT_MS);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
