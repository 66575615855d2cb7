import WebSocket from 'ws';
import { recordSecret } from './test-logs';
import { waitFor } from './wait-for';

/** A websocket that the server upgraded: every JSON text frame it sent, pings counted, and its close. */
export interface OpenedSocket {
  opened: true;
  ws: WebSocket;
  /** Parsed JSON text frames, in arrival order (collected from the first frame on). */
  frames: any[];
  /** Pings received so far. */
  pings(): number;
  /** Resolves when the socket has closed, with the close code and reason the server sent. */
  closed: Promise<{ code: number; reason: string }>;
  /** Waits for the `n`-th frame (1-based) and returns it. */
  frame(n: number, timeoutMs?: number): Promise<any>;
}

/** A handshake the server refused before the upgrade: its HTTP status and (JSON) body. */
export interface RefusedSocket {
  opened: false;
  status: number;
  contentType: string | undefined;
  body: any;
}

/**
 * Opens a websocket URL with the `ws` client and reports either the open socket or the server's
 * refusal (read through the client's `unexpected-response` event). Other failures reject.
 */
export function openSocket(url: string): Promise<OpenedSocket | RefusedSocket> {
  for (const [ticket] of url.matchAll(/wst_[0-9A-Za-z]+/g)) recordSecret('websocket ticket', ticket);
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const frames: any[] = [];
    let pings = 0;
    let refused = false;
    const closed = new Promise<{ code: number; reason: string }>((resolveClose) =>
      ws.once('close', (code, reason) => resolveClose({ code, reason: reason.toString('utf8') })),
    );
    ws.on('message', (data, isBinary) => {
      // binaryType is 'nodebuffer': a frame arrives as one Buffer.
      frames.push(isBinary ? { binary: true } : JSON.parse((data as Buffer).toString('utf8')));
    });
    ws.on('ping', () => pings++);
    ws.on('error', (err) => {
      if (!refused) reject(err);
    });
    ws.once('open', () =>
      resolve({
        opened: true,
        ws,
        frames,
        pings: () => pings,
        closed,
        frame: (n, timeoutMs = 30_000) =>
          waitFor(`websocket frame #${n}`, () => (frames.length >= n ? { value: frames[n - 1] } : undefined), {
            timeoutMs,
          }).then((f) => f.value),
      }),
    );
    ws.once('unexpected-response', (_req, res) => {
      refused = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // leave as text: the assertion on it will say what came
        }
        resolve({ opened: false, status: res.statusCode ?? 0, contentType: res.headers['content-type'], body });
        ws.terminate();
      });
    });
  });
}

/** Opens a URL that must be upgraded; fails with the refusal otherwise. */
export async function openOk(url: string): Promise<OpenedSocket> {
  const outcome = await openSocket(url);
  if (!outcome.opened) throw new Error(`websocket refused: ${outcome.status} ${JSON.stringify(outcome.body)}`);
  return outcome;
}

/** Opens a URL that must be refused before the upgrade; fails if a socket opens. */
export async function openRefused(url: string): Promise<RefusedSocket> {
  const outcome = await openSocket(url);
  if (outcome.opened) {
    outcome.ws.terminate();
    throw new Error('the websocket opened, but a refusal was expected');
  }
  return outcome;
}

/** The same websocket URL (path and ticket) on another server: `baseUrl` is its http:// address. */
export function socketUrlOn(baseUrl: string, websocketUrl: string): string {
  const target = new URL(websocketUrl);
  const base = new URL(baseUrl);
  target.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
  target.host = base.host;
  return target.toString();
}
