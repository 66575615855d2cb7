import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface SwaksResult {
  /** swaks's exit code: 0 when the message was accepted. */
  code: number;
  /** The server's replies in order, e.g. "250 2.0.0 Accepted: stored in 1 mailbox". */
  replies: string[];
  transcript: string;
}

/**
 * Runs Debian's swaks (a real SMTP client) against 127.0.0.1:`port` with `args`. The replies are the
 * server lines of its transcript ("<-" in clear text, "<~" over TLS, "<**"/"<~*" for refusals).
 * `timeoutMs` (60 s) bounds the whole run: more for a large message on a busy machine.
 */
export async function swaks(port: number, args: string[], options: { timeoutMs?: number } = {}): Promise<SwaksResult> {
  let code = 0;
  let transcript: string;
  try {
    const out = await run('swaks', ['--server', '127.0.0.1', '--port', String(port), '--hide-informational', ...args], {
      timeout: options.timeoutMs ?? 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    transcript = out.stdout + out.stderr;
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw err;
    code = failed.code;
    transcript = `${failed.stdout ?? ''}${failed.stderr ?? ''}`;
  }
  const replies = transcript
    .split('\n')
    .map((line) => /^\s*<(?:-|~|\*\*|~\*)\s+(\d{3}[ -].*)$/.exec(line)?.[1]?.trimEnd())
    .filter((line): line is string => line !== undefined);
  return { code, replies, transcript };
}

/**
 * Sends `raw` (a whole RFC 5322 message, CRLF line ends) with swaks to 127.0.0.1:`port`, byte for
 * byte: for a message whose DKIM signature must still verify on arrival. By default swaks rewrites
 * DATA (it replaces tokens such as %DATE%, may add headers, appends a line end), so this passes
 * `--no-data-fixup`, under which swaks sends the file as it is plus a CRLF and neither dot-stuffs nor
 * ends DATA: the file holds the wire form, dot-stuffed and ending in the lone dot. The DATA lines
 * of swaks's transcript are checked to be the message's own, so a swaks that changed them fails here.
 */
export async function swaksExact(
  port: number,
  raw: string,
  envelope: { from: string; to: string },
): Promise<SwaksResult> {
  const dir = await mkdtemp(join(tmpdir(), 'alcarta-swaks-'));
  const file = join(dir, 'message.eml');
  const wire = raw.replace(/^\./gm, '..');
  try {
    await writeFile(file, `${wire}.`, 'utf8');
    const result = await swaks(port, [
      '--from',
      envelope.from,
      '--to',
      envelope.to,
      '--no-data-fixup',
      '--data',
      `@${file}`,
    ]);
    const lines = result.transcript.split('\n');
    const start = lines.findIndex((line) => /^\s*<-\s+354[ -]/.test(line)) + 1;
    const end = lines.indexOf(' -> .', start);
    if (start === 0 || end < 0) throw new Error(`swaks sent no complete DATA:\n${result.transcript}`);
    // Under --no-data-fixup swaks prints each DATA line with its CR.
    const sent = lines.slice(start, end).map((line) => line.replace(/^ -> ?/, '').replace(/\r$/, ''));
    if (`${sent.join('\r\n')}\r\n` !== wire) {
      throw new Error(`swaks changed the message:\n${result.transcript}`);
    }
    return result;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The reply lines of `result` with this code (e.g. '550'). */
export function repliesWith(result: SwaksResult, code: string): string[] {
  return result.replies.filter((r) => r.startsWith(code));
}

/**
 * A bare SMTP connection for what no well-behaved client does (pipelining floods, leaving in the
 * middle of DATA): write raw bytes, read complete replies.
 */
export class RawSmtp {
  private buffer = '';
  private readonly replies: string[] = [];
  private waiters: Array<() => void> = [];
  private closed = false;

  private constructor(private readonly socket: Socket) {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      // A reply ends with a line "NNN text" (a space after the code); "NNN-text" lines continue it.
      for (let end = this.buffer.indexOf('\r\n'); end !== -1; end = this.buffer.indexOf('\r\n')) {
        const line = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        if (/^\d{3} /.test(line) || /^\d{3}$/.test(line)) this.replies.push(line);
      }
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  /** Connects to 127.0.0.1:`port`, from `localAddress` (another loopback address: another client). */
  static open(port: number, localAddress?: string): Promise<RawSmtp> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: '127.0.0.1', localAddress }, () => resolve(new RawSmtp(socket)));
      socket.once('error', reject);
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Writes `chunks` as fast as the server reads them; stops early if the connection closes. */
  async stream(chunks: Iterable<Buffer>): Promise<void> {
    for (const chunk of chunks) {
      if (this.closed) return;
      if (this.socket.write(chunk)) continue;
      await new Promise<void>((resolve) => {
        const done = () => {
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve();
        };
        this.socket.on('drain', done);
        this.socket.on('close', done);
      });
    }
  }

  /** The next reply (its last line); fails when the connection closes first or after `timeoutMs`. */
  async reply(timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (this.replies.length === 0) {
      if (this.closed) throw new Error('the SMTP connection closed without a reply');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('no SMTP reply in time');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.replies.shift()!;
  }

  /** Sends one command line and returns its reply. */
  async command(line: string): Promise<string> {
    this.write(`${line}\r\n`);
    return this.reply();
  }

  /** Resolves once the server has closed the connection. */
  async closedByServer(timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('the server did not close the connection');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}

/** The value of one sample of a Prometheus metric at `baseUrl`/metrics (0 when absent). */
export async function metricValue(baseUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(new URL('/metrics', baseUrl))).text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = (m[2] ?? '').split(',').filter((s) => s.length > 0);
    if (wanted.length === have.length && wanted.every((w) => have.includes(w))) return Number(m[3]);
  }
  return 0;
}
