import { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Duplex } from 'node:stream';

/** The headers of an upgrade offer (RFC 9110 7.8; HTTP2-Settings goes with `Upgrade: h2c`, RFC 7540 3.2). */
const OFFER_HEADERS = new Set(['upgrade', 'http2-settings']);

/**
 * Serves a request that offered a protocol upgrade the server declines, as the plain HTTP/1.1
 * request it also is: `Upgrade: websocket` on a path that is no websocket endpoint, or
 * `Upgrade: h2c` from `curl --http2`. HTTP lets a server ignore an offer and answer normally,
 * and clients and proxies rely on that.
 *
 * Node gives every request with `Connection: upgrade` to the server's 'upgrade' listeners once
 * there is one (the websocket gateway), without a response object and with its socket taken from
 * the HTTP parser. So the request is handed back to the server as a new connection whose first
 * bytes are its head without the offer, followed by what the client sent after the head (a body):
 * Node's own parser, limits, body handling and keep-alive serve it like any request, and a later
 * request on the connection may still upgrade. (Node 24.9 added the server option
 * `shouldUpgradeCallback` for this; the Node versions Alcarta supports reach back before it.)
 */
export function serveDeclinedUpgrade(server: Server, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  // A request pipelined behind one whose response is still being written: Node hands the upgrade
  // over at once. It waits for that response, as Node waits for the response of a pipelined
  // request; if that response closes the connection, the request goes with it, as in Node.
  const previous = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (previous && !previous.writableFinished) {
    previous.once('finish', () => {
      if (!socket.destroyed && !socket.writableEnded) serveDeclinedUpgrade(server, req, socket, head);
    });
    return;
  }
  const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    const lower = name.toLowerCase();
    if (OFFER_HEADERS.has(lower)) continue;
    let value = req.rawHeaders[i + 1];
    if (lower === 'connection') {
      value = value
        .split(',')
        .map((option) => option.trim())
        .filter((option) => option && !OFFER_HEADERS.has(option.toLowerCase()))
        .join(', ');
      if (!value) continue;
    }
    lines.push(`${name}: ${value}`);
  }
  // Node reads header bytes as latin1, one character each: written back the same way, they are the client's bytes.
  socket.unshift(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), head]));
  server.emit('connection', socket);
}
