import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';
import { freePort } from '#app/common/net.js';
import { REPO_ROOT } from './spawned-server';
import { recordingSecrets, recordSecret } from './test-logs';
import { waitFor } from './wait-for';
import { listening } from './tcp-listening';

/** Debian's python3 (the pyenv python3 first on PATH does not see Debian's python3-aiosmtpd). */
const PYTHON = '/usr/bin/python3';

export type RelayMode = 'accept' | 'refuse-rcpt' | 'tempfail-rcpt' | 'hold';

export interface ReceivedMail {
  id: string;
  mailFrom: string;
  rcptTos: string[];
  /** The message as the relay received it (DATA). */
  raw: Buffer;
}

/**
 * A real SMTP server that nobody here wrote, as the outbound relay: Debian's aiosmtpd with the
 * recording handler of smtp_relay_handler.py. It keeps its port across stop/start, so a server
 * configured with its URL finds it again ("relay down, then back").
 */
export class TestSmtpRelay {
  private process: ChildProcess | undefined;
  private output = '';
  /** Mails whose approval-link tokens are recorded already. */
  private readonly recorded = new Set<string>();

  private constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  static async start(mode: RelayMode = 'accept'): Promise<TestSmtpRelay> {
    const dir = await mkdtemp(join(tmpdir(), 'alcarta-relay-'));
    const relay = new TestSmtpRelay(await freePort(), dir);
    await relay.setMode(mode);
    await relay.resume();
    return relay;
  }

  /** The URL for ALCARTA_SMTP_RELAY_URL; the credentials test that no password leaks (no AUTH is offered). */
  get url(): string {
    return `smtp://relay-user:relay-secret-pw@127.0.0.1:${this.port}`;
  }

  async setMode(mode: RelayMode): Promise<void> {
    await writeFile(join(this.dir, 'mode'), mode);
  }

  /** Starts the server process (again) on its port; nothing to do while it runs. */
  async resume(): Promise<void> {
    if (this.process && this.process.exitCode === null && this.process.signalCode === null) return;
    if (!existsSync(PYTHON)) throw new Error(`${PYTHON} is missing: install python3-aiosmtpd (apt-get)`);
    const child = spawn(
      PYTHON,
      ['-m', 'aiosmtpd', '-n', '-l', `127.0.0.1:${this.port}`, '-c', 'smtp_relay_handler.RecordingHandler', this.dir],
      { env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'test', 'support') }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.process = child;
    child.stdout.setEncoding('utf8').on('data', (s: string) => (this.output += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (this.output += s));
    let exited = false;
    child.once('exit', () => (exited = true));
    await waitFor(
      'the aiosmtpd relay to listen',
      async () => {
        if (exited) throw new Error(`aiosmtpd exited: ${this.output}`);
        return listening(this.port);
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
  }

  /** Stops the server process (the relay is "down": connections are refused). */
  async pause(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    await waitFor('the relay port to close', async () => !(await listening(this.port)));
  }

  async stop(): Promise<void> {
    await this.pause();
    await rm(this.dir, { recursive: true, force: true });
  }

  /** Messages whose DATA is being held (mode `hold`). */
  async held(): Promise<number> {
    return (await readdir(this.dir)).filter((f) => f.startsWith('held-')).length;
  }

  /** Every message received so far, oldest first. */
  async received(): Promise<ReceivedMail[]> {
    const names = (await readdir(this.dir)).filter((f) => f.endsWith('.json')).sort();
    const mails = await Promise.all(
      names.map(async (name) => {
        const record = JSON.parse(await readFile(join(this.dir, name), 'utf8')) as {
          id: string;
          mail_from: string;
          rcpt_tos: string[];
        };
        return {
          id: record.id,
          mailFrom: record.mail_from,
          rcptTos: record.rcpt_tos,
          raw: await readFile(join(this.dir, `${record.id}.eml`)),
        };
      }),
    );
    await Promise.all(mails.map((mail) => this.recordLinkTokens(mail)));
    return mails;
  }

  /** The approval-link tokens a mail carries are secrets: the run's log scan looks for them. */
  private async recordLinkTokens(mail: ReceivedMail): Promise<void> {
    if (!recordingSecrets || this.recorded.has(mail.id)) return;
    this.recorded.add(mail.id);
    const parsed = await simpleParser(mail.raw);
    for (const [, token] of `${parsed.text ?? ''} ${parsed.html || ''}`.matchAll(
      /\/console\/links\/([A-Za-z0-9_-]+)/g,
    )) {
      recordSecret('approval-link token (mail)', token);
    }
  }

  /** Received messages whose Message-ID header is `messageIdHeader`. */
  async receivedWithMessageId(messageIdHeader: string): Promise<ReceivedMail[]> {
    return (await this.received()).filter((m) => headerOf(m.raw, 'message-id') === messageIdHeader);
  }
}

/** The first value of a header field of a raw message (unfolded), or undefined. */
export function headerOf(raw: Buffer, name: string): string | undefined {
  const text = raw.toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  const head = (end === -1 ? text : text.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  for (const line of head.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === name.toLowerCase()) {
      return line.slice(colon + 1).trim();
    }
  }
  return undefined;
}
