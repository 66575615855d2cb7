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
