/** Where websocket URLs point (the gateway serves this path on the HTTP port). */
export const WAIT_SOCKET_PATH = '/v1/waits/ws';

/**
 * The websocket URL that carries `ticket`. Relative to the public URL, so a path prefix of a
 * reverse proxy (https://host/alcarta) stays; `wss:` behind `https:`.
 */
export function waitSocketUrl(publicUrl: string, ticket: string): string {
  const url = new URL(WAIT_SOCKET_PATH.slice(1), `${publicUrl}/`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('ticket', ticket);
  return url.toString();
}
