import { randomBytes } from 'node:crypto';
import { Logger } from 'pino';
import { freePort } from '#app/common/net.js';
import { DnsResolver } from '#app/mail/dns-resolver.js';
import { startServer, RunningServer } from '#app/server.js';
import { dnsZone } from './dns-zone';
import { createTestDatabase, TestDatabase } from './database';
import { RestClient } from './rest';
import { recordSecret, recordSecretSettings, serverLogger } from './test-logs';

export interface TestServer {
  url: string;
  db: TestDatabase;
  /** Secret of the bootstrap admin token (ALCARTA_BOOTSTRAP_TOKEN). */
  adminToken: string;
  admin: RestClient;
  running: RunningServer;
  /** Stops the server; with `keepDatabase`, the database stays for another server. */
  close(options?: { keepDatabase?: boolean }): Promise<void>;
}

export function randomSecret(): string {
  const chars = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  const secret = `alc_${[...randomBytes(48)].map((b) => chars[b % 62]).join('')}`;
  recordSecret('token secret (randomSecret)', secret);
  return secret;
}

/**
 * Starts the real application in this process on a free loopback port, against a fresh database
 * (or `db`, to share one between servers), through the same start-up path as `npm start`.
 */
export async function startTestServer(
  options: {
    env?: Record<string, string>;
    db?: TestDatabase;
    adminToken?: string;
    /** Listen on a port chosen in advance and make it ALCARTA_PUBLIC_URL, so websocket URLs point here. */
    ownPublicUrl?: boolean;
    /** DNS for sender authentication (see dns-zone.ts); by default an empty zone: tests never ask the real DNS. */
    dnsResolver?: DnsResolver;
    /** Where the server logs; by default the run's log file (test-logs.ts), or nowhere at level silent. */
    logger?: Logger;
  } = {},
): Promise<TestServer> {
  const db = options.db ?? (await createTestDatabase());
  const adminToken = options.adminToken ?? randomSecret();
  const start = async (port: number) => {
    const overrides = {
      DATABASE_URL: db.url,
      PORT: String(port),
      ...(options.ownPublicUrl && { ALCARTA_PUBLIC_URL: `http://127.0.0.1:${port}` }),
      ALCARTA_HOST: '127.0.0.1',
      ALCARTA_BOOTSTRAP_TOKEN: adminToken,
      ALCARTA_LOG_LEVEL: 'silent',
      ALCARTA_DB_POOL_SIZE: '5',
      // Parallel test servers must not all take port 2525: a test that wants SMTP passes '0'.
      ALCARTA_SMTP_PORT: 'off',
      ...options.env,
    };
    recordSecretSettings(overrides);
    return startServer({
      overrides,
      logger: options.logger ?? serverLogger(overrides.ALCARTA_LOG_LEVEL),
      dnsResolver: options.dnsResolver ?? dnsZone(),
    });
  };
  let running: RunningServer | undefined;
  // A port chosen in advance can be taken by another process before the server binds it: choose again.
  for (let attempt = 1; !running; attempt++) {
    try {
      running = await start(options.ownPublicUrl ? await freePort() : 0);
    } catch (err) {
      if (attempt >= 5 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
  }
  return {
    url: running.url,
    db,
    adminToken,
    admin: new RestClient(running.url, adminToken),
    running,
    close: async ({ keepDatabase = false } = {}) => {
      await running.close();
      if (!keepDatabase) await db.drop();
    },
  };
}

let addressCounter = 0;

/** Creates a mailbox through the admin API and returns its id. */
export async function createMailbox(admin: RestClient, address?: string): Promise<string> {
  const res = await admin.post('/v1/mailboxes', {
    address: address ?? `agent-${process.pid}-${++addressCounter}-${randomBytes(3).toString('hex')}@example.com`,
  });
  if (res.status !== 201) throw new Error(`mailbox creation failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.mailbox_id as string;
}

/** Creates a token through the admin API and returns its id and secret. */
export async function createToken(
  admin: RestClient,
  spec: { scopes: string[]; mailboxes: string[]; name?: string; expires_at?: string },
): Promise<{ id: string; secret: string }> {
  const res = await admin.post('/v1/tokens', { name: spec.name ?? 'test token', ...spec });
  if (res.status !== 201) throw new Error(`token creation failed: ${res.status} ${JSON.stringify(res.body)}`);
  recordSecret('token secret (createToken)', res.body.secret as string);
  return { id: res.body.token_id as string, secret: res.body.secret as string };
}

/** Ingests a JSON message and returns its id. */
export async function ingest(
  client: RestClient,
  mailboxId: string,
  message: Partial<{
    from: string;
    to: string[];
    cc: string[];
    subject: string;
    text: string;
    html: string;
    message_id_header: string;
    in_reply_to: string;
  }> = {},
): Promise<string> {
  const res = await client.post(`/v1/mailboxes/${mailboxId}/messages`, {
    from: 'sender@example.org',
    to: ['agent@example.com'],
    subject: 'Hello',
    text: 'Hello there',
    ...message,
  });
  if (res.status !== 201) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message_id as string;
}
