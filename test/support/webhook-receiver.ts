import assert from 'node:assert/strict';
import { readFile, rm } from 'node:fs/promises';
import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { testCertificateAuthority, TestCertificateAuthority } from './tls-certificates';

/** One POST the receiver got: its Standard Webhooks headers and the parsed body. */
export interface ReceivedWebhook {
  path: string;
  id: string;
  timestamp: string;
  signature: string;
  raw: string;
  body: Record<string, any>;
  /** The status the receiver answered, or `hold`. */
  answered: number | 'hold';
}

/**
 * A real HTTP receiver on 127.0.0.1 (docs/webhooks.md), or HTTPS with `startHttps`. `answer` picks
 * the status of each POST (default 204). Every POST is checked with the `standardwebhooks` library
 * against every secret registered for its path with `expectSecrets`, as a receiver would: a POST
 * that one of them does not verify fails the test that reads it (`received`).
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  /** The status to answer, or `hold`: no answer, the request stays open (a slow endpoint). */
  answer: (hook: Omit<ReceivedWebhook, 'answered'>) => number | 'hold' = () => 204;
  private readonly secrets = new Map<string, string[]>();
  private readonly failures: string[] = [];

  private constructor(
    private readonly server: Server,
    /** For HTTPS: the CA that issued the receiver's certificate, which a server must trust. */
    readonly certificate: TestCertificateAuthority | null,
    /** The temporary directory of a certificate the receiver made itself, removed on close. */
    private readonly ownCertificateDir: string | null,
  ) {}

  /** A plain-HTTP receiver (http://127.0.0.1:PORT/…). */
  static start(): Promise<WebhookReceiver> {
    return WebhookReceiver.listen(createServer(), null, null);
  }

  /**
   * An HTTPS receiver (https://127.0.0.1:PORT/…) whose certificate, for 127.0.0.1 and localhost,
   * is issued by `certificate`'s CA (by default a throwaway CA made here). Only a server that trusts
   * that CA delivers to it: a spawned one with `NODE_EXTRA_CA_CERTS` = `caFile`
   * (spawned-server.ts); the in-process test server cannot change its trust store once started.
   */
  static async startHttps(certificate?: TestCertificateAuthority): Promise<WebhookReceiver> {
    const issued = certificate ?? (await testCertificateAuthority());
    const [cert, key] = await Promise.all([readFile(issued.certFile), readFile(issued.keyFile)]);
    return WebhookReceiver.listen(createHttpsServer({ cert, key }), issued, certificate ? null : issued.dir);
  }

  /** The CA file to trust (`NODE_EXTRA_CA_CERTS`) for an HTTPS receiver. */
  get caFile(): string {
    assert.ok(this.certificate, 'only an HTTPS receiver has a CA');
    return this.certificate.caFile;
  }

  private static async listen(
    server: Server,
    certificate: TestCertificateAuthority | null,
    ownCertificateDir: string | null,
  ): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver(server, certificate, ownCertificateDir);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const hook = receiver.record(req.url ?? '/', req.headers, raw);
        const status = receiver.answer(hook);
        receiver.received.push({ ...hook, answered: status });
        if (status !== 'hold') res.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  url(path: string): string {
    const scheme = this.certificate ? 'https' : 'http';
    return `${scheme}://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  /** The secrets every POST to `path` must verify with (each on its own). */
  expectSecrets(path: string, ...secrets: string[]): void {
    this.secrets.set(path, secrets);
  }

  /** The POSTs to `path` so far; fails if any POST did not verify. */
  to(path: string): ReceivedWebhook[] {
    assert.deepEqual(this.failures, [], 'every webhook verifies with the standardwebhooks library');
    return this.received.filter((r) => r.path === path);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.ownCertificateDir) await rm(this.ownCertificateDir, { recursive: true, force: true });
  }

  private record(path: string, headers: IncomingHttpHeaders, raw: string): Omit<ReceivedWebhook, 'answered'> {
    const hook = {
      path,
      id: String(headers['webhook-id']),
      timestamp: String(headers['webhook-timestamp']),
      signature: String(headers['webhook-signature']),
      raw,
      body: JSON.parse(raw) as Record<string, any>,
    };
    const secrets = this.secrets.get(path);
    if (!secrets) this.failures.push(`no secret registered for ${path}`);
    for (const secret of secrets ?? []) {
      try {
        new Webhook(secret).verify(raw, {
          'webhook-id': hook.id,
          'webhook-timestamp': hook.timestamp,
          'webhook-signature': hook.signature,
        });
      } catch (err) {
        this.failures.push(`${path} ${hook.id}: ${(err as Error).message}`);
      }
    }
    return hook;
  }
}
