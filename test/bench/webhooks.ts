/**
 * `npm run bench:webhooks`: what webhook delivery (docs/webhooks.md) sustains on this machine.
 *
 *   without endpoints  mail ingested over REST at RATE messages/s for SECONDS s into MAILBOXES
 *                      mailboxes that no endpoint covers: the ingest's latency without deliveries
 *   with endpoints     the same into MAILBOXES other mailboxes, each with one endpoint for
 *                      message_received at its own HTTP receiver on 127.0.0.1 (one delivery per
 *                      event); from the event's `received_at` to the POST at the receiver
 *                      [1,000 events/s delivered, p99 ≤ 2 s]
 *
 * Both at RATE (1,000/s) and at LOW_RATE (100/s), so that the latency of delivery shows also
 * when ingest is not saturated.
 *
 * The replica measured delivers every webhook. With PRODUCERS > 0 (default 1) the mail is ingested
 * through the REST API of that many other replicas on the same database, whose webhook workers are
 * off (ALCARTA_WEBHOOK_CONCURRENCY=0): they queue the deliveries in the event's transaction as any
 * replica does, and the measured replica claims and POSTs them all. PRODUCERS=0: the measured
 * replica ingests as well.
 *
 * SMTP fan-out (with producers): RATE / MAILBOXES messages/s for SECONDS s over SMTP to a producer,
 * each addressed to all MAILBOXES mailboxes with an endpoint, as mail to a team of agents is: each
 * message is stored once per mailbox in one transaction, so it makes MAILBOXES message_received
 * events, one for each endpoint. RATE events/s fanned out to the 10 endpoints, made by the product's
 * own SMTP ingest [1,000 events/s delivered, p99 ≤ 2 s].
 *
 * BENCH_CPU_PROF=<dir> writes the servers' CPU profiles there (cpu-profile-preload.ts).
 *
 * Also the server's RSS before and after, and the database cost: webhook_deliveries and
 * webhook_attempts rows and bytes per event. Ingest is paced open-loop (a request is due every
 * 1 / RATE s, at most IN_FLIGHT at a time: requests that would exceed it are counted as skipped).
 * The server is a real `node dist/main.js` process on DATABASE_URL's server (a fresh database on
 * it), else on a throwaway embedded PostgreSQL. The receivers answer 204 without verifying
 * signatures (test/e2e/webhooks.test.ts does), so that the bench process spends little CPU.
 */
import { readFile } from 'node:fs/promises';
import { createTransport } from 'nodemailer';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { secretsKey } from '../support/connected-mailboxes';
import { createTestDatabase, TestDatabase } from '../support/database';
import { freePort, spawnServer, SpawnedServer } from '../support/spawned-server';
import { randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { BenchRow, count, databaseServer, percentile, printTable, runBenchmark } from './report';

const RATE = Number(process.env.BENCH_RATE ?? 1000);
/** A second, lower rate: the latency of delivery when ingest is not the bottleneck. */
const LOW_RATE = Number(process.env.BENCH_LOW_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 256);
const MAILBOXES = 10;
/** Replicas that ingest (their webhook workers off) beside the one measured; 0: it ingests itself. */
const PRODUCERS = Number(process.env.BENCH_PRODUCERS ?? 1);
/** Events queued while no replica delivers, then delivered by one (needs PRODUCERS > 0; 0: skipped). */
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 5000);
const PROFILE_DIR = process.env.BENCH_CPU_PROF;
/** How long the deliveries may take to drain after the last ingest. */
const DRAIN_MS = Number(process.env.BENCH_DRAIN_SECONDS ?? 300) * 1000;

const token = randomSecret();
const rows: BenchRow[] = [];
const ms = (v: number) => `${v.toFixed(1)} ms`;
const latencyText = (sorted: number[]) => `p50 ${ms(percentile(sorted, 50))}, p99 ${ms(percentile(sorted, 99))}`;

interface Receiver {
  server: Server;
  url: string;
}

/** Receipt latencies (ms from the event's received_at) of every message_received POSTed, by message id. */
const receipts = new Map<string, number>();
/** When (Date.now()) each message's POST arrived, by message id. */
const arrivals = new Map<string, number>();
/** The message ids of the SMTP fan-out's messages (their subject says so), in order of receipt. */
const fannedOut: string[] = [];
const FANOUT_SUBJECT = 'fan-out ';

async function startReceiver(): Promise<Receiver> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const now = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        message_id: string;
        received_at: string;
        subject: string;
      };
      if (!receipts.has(body.message_id)) {
        receipts.set(body.message_id, now - Date.parse(body.received_at));
        arrivals.set(body.message_id, now);
        if (body.subject.startsWith(FANOUT_SUBJECT)) fannedOut.push(body.message_id);
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` };
}

async function post(url: string, body: unknown): Promise<{ status: number; body: Record<string, any> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

/** The server process's resident set size in MiB (Linux /proc): now (VmRSS) or its peak (VmHWM). */
async function rssMiB(pid: number, which: 'VmRSS' | 'VmHWM' = 'VmRSS'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${which}:\\s+(\\d+) kB`).exec(status)![1]) / 1024;
}

interface IngestRun {
  sent: number;
  skipped: number;
  seconds: number;
  latencies: number[];
  messageIds: string[];
}

/**
 * Ingests at `rate` messages/s for SECONDS s, round-robin over `mailboxes` and over the `ingest`
 * replicas, at most IN_FLIGHT at a time.
 */
async function ingestPaced(ingest: SpawnedServer[], mailboxes: string[], rate: number): Promise<IngestRun> {
  const latencies: number[] = [];
  const messageIds: string[] = [];
  const pending = new Set<Promise<void>>();
  let skipped = 0;
  const total = rate * SECONDS;
  const started = performance.now();
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    // Pacing, not synchronisation: the next request is not due yet.
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    if (pending.size >= IN_FLIGHT) {
      skipped++;
      continue;
    }
    const sent = performance.now();
    const p = ingestOne(ingest, mailboxes, i).then((messageId) => {
      latencies.push(performance.now() - sent);
      messageIds.push(messageId);
    });
    pending.add(p);
    void p.finally(() => pending.delete(p)).catch(() => undefined);
  }
  await Promise.all(pending);
  const seconds = (performance.now() - started) / 1000;
  return { sent: messageIds.length, skipped, seconds, latencies: latencies.sort((a, b) => a - b), messageIds };
}

/** Message `i` of a run, over REST, round-robin over the replicas and mailboxes; its message id. */
async function ingestOne(ingest: SpawnedServer[], mailboxes: string[], i: number): Promise<string> {
  const res = await post(`${ingest[i % ingest.length].url}/v1/mailboxes/${mailboxes[i % mailboxes.length]}/messages`, {
    from: 'bench@sender.test',
    to: ['agent@example.com'],
    subject: `bench ${i}`,
    text: 'Hello there',
  });
  if (res.status !== 201) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message_id as string;
}

/** `total` messages as fast as the replicas take them, 64 at a time; their message ids. */
async function ingestAll(ingest: SpawnedServer[], mailboxes: string[], total: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  const lane = async () => {
    while (next < total) ids.push(await ingestOne(ingest, mailboxes, next++));
  };
  await Promise.all(Array.from({ length: 64 }, lane));
  return ids;
}

/**
 * The delivery engine alone: BACKLOG events ingested over REST on the producers while no replica
 * delivers, then one replica started that delivers them all. Its rate is events over the time from
 * the first POST at a receiver to the last. Returns that replica.
 */
async function backlog(
  env: Record<string, string>,
  producers: SpawnedServer[],
  hooked: string[],
): Promise<SpawnedServer> {
  const ids = await ingestAll(producers, hooked, BACKLOG);
  const deliverer = await spawnServer(env);
  const ready = Date.now();
  await waitFor('the backlog to reach the receivers', () => ids.every((id) => receipts.has(id)), {
    timeoutMs: DRAIN_MS,
    intervalMs: 100,
  });
  const times = ids.map((id) => arrivals.get(id)!).sort((a, b) => a - b);
  const seconds = (times[times.length - 1] - times[0]) / 1000;
  const rate = ids.length / seconds;
  rows.push([
    'backlog delivered by one replica',
    `${count(ids.length)} events ingested over REST on ${PRODUCERS} other replica${PRODUCERS > 1 ? 's' : ''} while none delivered, then 1 replica started, ${MAILBOXES} receivers`,
    `${count(ids.length)} delivered at ${rate.toFixed(0)}/s (${seconds.toFixed(1)} s from the first POST to the last; the last ${((times[times.length - 1] - ready) / 1000).toFixed(1)} s after the replica was ready); its RSS ${(await rssMiB(deliverer.pid)).toFixed(0)} MiB, peak ${(await rssMiB(deliverer.pid, 'VmHWM')).toFixed(0)} MiB`,
    rate >= 1000 ? 'met (1,000/s)' : 'MISSED (1,000/s)',
  ]);
  return deliverer;
}

async function createMailboxes(server: SpawnedServer, prefix: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < MAILBOXES; i++) {
    const res = await post(`${server.url}/v1/mailboxes`, { address: `${prefix}-${i}@example.com` });
    if (res.status !== 201) throw new Error(`mailbox: ${res.status} ${JSON.stringify(res.body)}`);
    ids.push(res.body.mailbox_id as string);
  }
  return ids;
}

async function tableCost(db: TestDatabase, table: string): Promise<{ rows: number; bytes: number }> {
  const [r] = await db.query<{ n: string; bytes: string }>(
    `SELECT (SELECT count(*) FROM ${table}) AS n, pg_total_relation_size('${table}') AS bytes`,
  );
  return { rows: Number(r.n), bytes: Number(r.bytes) };
}

/** One rate: ingest without endpoints, then with, then waits for every delivery. */
async function phase(ingest: SpawnedServer[], plain: string[], hooked: string[], rate: number): Promise<void> {
  const replicas =
    PRODUCERS > 0 ? `1 replica delivering, REST ingest on ${PRODUCERS} other${PRODUCERS > 1 ? 's' : ''}` : '1 replica';
  const setup = `${replicas}, ${rate}/s target for ${SECONDS} s, ${MAILBOXES} mailboxes`;
  const ingestText = (run: IngestRun) =>
    `${count(run.sent)} ingested at ${(run.sent / run.seconds).toFixed(0)}/s (${count(run.skipped)} skipped at ${IN_FLIGHT} in flight); ingest ${latencyText(run.latencies)}`;
  const without = await ingestPaced(ingest, plain, rate);
  rows.push(['REST ingest, no endpoints', setup, ingestText(without), '—']);

  const started = Date.now();
  const withHooks = await ingestPaced(ingest, hooked, rate);
  rows.push(['REST ingest, 1 endpoint per mailbox', setup, ingestText(withHooks), '—']);
  const ingested = Date.now();
  await waitFor('every event to reach its receiver', () => withHooks.messageIds.every((id) => receipts.has(id)), {
    timeoutMs: DRAIN_MS,
    intervalMs: 100,
  });
  const drained = (Date.now() - started) / 1000;
  const latencies = withHooks.messageIds.map((id) => receipts.get(id)!).sort((a, b) => a - b);
  const deliveredRate = latencies.length / drained;
  // The backlog left when ingest stopped, delivered with the CPU to itself.
  const late = withHooks.messageIds.filter((id) => arrivals.get(id)! > ingested).length;
  const drainText =
    late > rate
      ? `; after ingest stopped ${count(late)} more at ${(late / (drained - (ingested - started) / 1000)).toFixed(0)}/s`
      : '';
  const p99 = percentile(latencies, 99);
  // The throughput target applies at the full rate; the lower rate shows the latency alone.
  const full = rate >= 1000;
  const met = (!full || deliveredRate >= 1000 * 0.95) && p99 <= 2000;
  const target = full ? '1,000/s, p99 ≤ 2 s' : 'p99 ≤ 2 s';
  rows.push([
    'received_at → POST at the receiver',
    `${setup}, ${MAILBOXES} receivers on 127.0.0.1`,
    `${count(latencies.length)} delivered in ${drained.toFixed(1)} s (${deliveredRate.toFixed(0)}/s); ${latencyText(latencies)}, max ${ms(latencies[latencies.length - 1])}${drainText}`,
    met ? `met (${target})` : `MISSED (${target})`,
  ]);
}

/**
 * RATE events/s over SMTP: RATE / MAILBOXES messages/s to a producer's SMTP port, each to every
 * mailbox with an endpoint (paced open-loop over 16 pooled connections, at most IN_FLIGHT
 * messages open), then the latency of every delivery from its event's `received_at`.
 */
async function smtpFanOut(smtpPort: number, addresses: string[]): Promise<void> {
  const transport = createTransport({
    pool: true,
    maxConnections: 16,
    maxMessages: Infinity,
    host: '127.0.0.1',
    port: smtpPort,
    secure: false,
    ignoreTLS: true,
  });
  const messagesPerSecond = RATE / addresses.length;
  const total = Math.round(messagesPerSecond * SECONDS);
  try {
    // Warm-up: opens the pool's connections (each pays smtp-server's greeting delay once).
    await Promise.all(
      Array.from({ length: 16 }, () =>
        transport.sendMail({ from: 'bench@sender.test', to: addresses[0], subject: 'warm', text: 'warm' }),
      ),
    );
    const pending = new Set<Promise<unknown>>();
    let skipped = 0;
    let sent = 0;
    const started = performance.now();
    const startedAt = Date.now();
    for (let i = 0; i < total; i++) {
      const wait = started + (i * 1000) / messagesPerSecond - performance.now();
      // Pacing, not synchronisation: the next message is not due yet.
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
      if (pending.size >= IN_FLIGHT) {
        skipped++;
        continue;
      }
      const p = transport
        .sendMail({ from: 'bench@sender.test', to: addresses, subject: `${FANOUT_SUBJECT}${i}`, text: 'Hello there' })
        .then(() => sent++);
      pending.add(p);
      void p.finally(() => pending.delete(p)).catch(() => undefined);
    }
    await Promise.all(pending);
    const sendSeconds = (performance.now() - started) / 1000;
    const expected = sent * addresses.length;
    await waitFor('every fanned-out event to reach its receiver', () => fannedOut.length >= expected, {
      timeoutMs: DRAIN_MS,
      intervalMs: 100,
    });
    const latencies = fannedOut.map((id) => receipts.get(id)!).sort((a, b) => a - b);
    const lastArrival = Math.max(...fannedOut.map((id) => arrivals.get(id)!));
    const drained = (lastArrival - startedAt) / 1000;
    const deliveredRate = latencies.length / drained;
    const p99 = percentile(latencies, 99);
    const met = deliveredRate >= 1000 * 0.95 && p99 <= 2000;
    rows.push([
      'SMTP fan-out: received_at → POST at the receiver',
      `1 replica delivering, SMTP on 1 other: ${messagesPerSecond}/s messages each to the ${addresses.length} mailboxes with endpoints (${RATE} events/s) for ${SECONDS} s, 16 connections (nodemailer)`,
      `${count(sent)} messages sent at ${(sent / sendSeconds).toFixed(0)}/s (${count(skipped)} skipped at ${IN_FLIGHT} open); ${count(latencies.length)} events delivered in ${drained.toFixed(1)} s (${deliveredRate.toFixed(0)}/s); ${latencyText(latencies)}, max ${ms(latencies[latencies.length - 1])}`,
      met ? 'met (1,000 events/s, p99 ≤ 2 s)' : 'MISSED (1,000 events/s, p99 ≤ 2 s)',
    ]);
  } finally {
    transport.close();
  }
}

async function main(): Promise<void> {
  const releaseDatabase = await databaseServer();
  const db = await createTestDatabase();
  const receivers = await Promise.all(Array.from({ length: MAILBOXES }, () => startReceiver()));
  const env = {
    DATABASE_URL: db.url,
    ALCARTA_BOOTSTRAP_TOKEN: token,
    ALCARTA_LOG_LEVEL: 'warn',
    ALCARTA_DB_POOL_SIZE: '10',
    ALCARTA_RATE_LIMIT_PER_SECOND: '0',
    ALCARTA_SECRETS_KEY: secretsKey(),
    ALCARTA_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    ...(PROFILE_DIR ? { NODE_OPTIONS: `--require ${join(__dirname, 'cpu-profile-preload.js')}` } : {}),
  };
  // The replica measured: default webhook settings (ALCARTA_WEBHOOK_CONCURRENCY, ALCARTA_DB_WORKER_POOL_SIZE).
  let server = await spawnServer(env);
  const producers: SpawnedServer[] = [];
  // The first producer also listens for SMTP (the fan-out run).
  const smtpPort = await freePort();
  for (let i = 0; i < PRODUCERS; i++) {
    producers.push(
      await spawnServer({
        ...env,
        ALCARTA_WEBHOOK_CONCURRENCY: '0',
        ...(i === 0 ? { ALCARTA_SMTP_PORT: String(smtpPort), ALCARTA_SMTP_MAX_CLIENTS: '100' } : {}),
      }),
    );
  }
  const ingest = producers.length > 0 ? producers : [server];
  try {
    const plain = await createMailboxes(server, 'plain');
    const hooked = await createMailboxes(server, 'hooked');
    const hookedAddresses = hooked.map((_, i) => `hooked-${i}@example.com`);
    for (let i = 0; i < MAILBOXES; i++) {
      const res = await post(`${server.url}/v1/webhooks`, {
        url: receivers[i].url,
        events: ['message_received'],
        mailbox_ids: [hooked[i]],
      });
      if (res.status !== 201) throw new Error(`webhook: ${res.status} ${JSON.stringify(res.body)}`);
    }
    const rssBefore = await rssMiB(server.pid);
    for (const rate of [RATE, LOW_RATE]) await phase(ingest, plain, hooked, rate);
    if (PRODUCERS > 0) await smtpFanOut(smtpPort, hookedAddresses);
    const rssAfter = await rssMiB(server.pid);
    rows.push([
      'RSS of the replica delivering',
      PRODUCERS > 0 ? 'both rates and the SMTP fan-out' : 'both rates',
      `${rssBefore.toFixed(0)} MiB before, ${rssAfter.toFixed(0)} MiB after`,
      '—',
    ]);
    if (PRODUCERS > 0 && BACKLOG > 0) {
      await server.stop();
      server = await backlog(env, producers, hooked);
    }
    const deliveries = await tableCost(db, 'webhook_deliveries');
    const attempts = await tableCost(db, 'webhook_attempts');
    const events = receipts.size;
    rows.push([
      'database cost per event',
      `${count(events)} events with one endpoint each`,
      `webhook_deliveries ${(deliveries.rows / events).toFixed(2)} rows, ${(deliveries.bytes / events).toFixed(0)} B; ` +
        `webhook_attempts ${(attempts.rows / events).toFixed(2)} rows, ${(attempts.bytes / events).toFixed(0)} B (tables with indexes)`,
      '—',
    ]);
  } finally {
    await Promise.all([server, ...producers].map((s) => s.stop()));
    await Promise.all(receivers.map((r) => new Promise((resolve) => r.server.close(resolve))));
    await db.drop();
    await releaseDatabase();
  }

  printTable('Webhooks benchmark', rows);
}

runBenchmark(main);
