/** Waits currently parked in the server at `baseUrl` (from its /metrics), by kind. */
export async function activeWaits(baseUrl: string, kind?: 'message' | 'request'): Promise<number> {
  const text = await (await fetch(new URL('/metrics', baseUrl))).text();
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^alcarta_active_waits\{([^}]*)\} (\d+)/.exec(line);
    if (m && (!kind || m[1].includes(`kind="${kind}"`))) total += Number(m[2]);
  }
  return total;
}
