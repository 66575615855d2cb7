/**
 * `npm run bench:audit`: what the audit trail's head lock (docs/audit.md, "Many replicas") lets
 * through. Every audited act locks the one `audit_head` row FOR UPDATE and holds it to its commit,
 * so appends from every replica are serialized by PostgreSQL.
 *
 *   token creations  CLIENTS REST clients per replica create tokens in a loop (one append each),
 *                    on 1 and on REPLICAS server processes sharing one database
 *   decisions        REPLICAS × DECISIONS pending requests (made first through MCP), then decided
 *                    over REST, each replica its own, IN_FLIGHT at a time on every replica at once
 *   append alone     AuditLog.append in the bench process, in a transaction of its own, on 1 and on
 *                    CONNECTIONS connections: the ceiling the lock itself sets, without HTTP or the act
 *
 * For the service rows, appends per second are the audit_log rows written in the window; the lock
 * waits are sampled from pg_stat_activity (backends of the database waiting on a lock; these acts
 * contend on nothing but the head). Each server is a real `node dist/main.js` process on
 * DATABASE_URL's server (a fresh database on it), else on a throwaway embedded PostgreSQL. The run
 * ends with `audit verify` over everything it appended.
 */
import { readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { DataSource } from 'typeorm';
import { AuditLog } from '#app/audit/audit-log.js';
import { runCli } from '../support/cli';
import { createTestDatabase, TestDatabase } from '../support/database';
import { mapInFlight } from '../support/in-flight';
import { callOk } from '../support/mcp';
import { Replica, ReplicaSet } from '../support/replicas';
import { createMailbox, randomSecret } from '../support/test-server';
import { BenchRow, count, databaseServer, percentile, printTable, runBenchmark } from './report';

const REPLICAS = Number(process.env.BENCH_REPLICAS ?? 4);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 16);
const DECISIONS = Number(process.env.BENCH_DECISIONS ?? 500);
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 100);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const POOL_SIZE = 10;
/** How often pg_stat_activity is sampled for lock waits: sampling, not synchronisation. */
const SAMPLE_MS = 10;

interface Window {
  /** audit_log rows appended per second in the window. */
  rate: number;
  /** Latencies of the calls that finished in the window, ascending, in ms. */
  latencies: number[];
  /** Mean number of backends waiting on a lock, and the share of samples with at least one. */
  meanWaiters: number;
  waitingShare: number;
  /** Share of the machine's CPU time that was busy in the window (every process, not only ours). */
  machineBusy: number | undefined;
}

const ms = (v: number) => `${v.toFixed(1)} ms`;
const latencyText = (sorted: number[]) => `p50 ${ms(percentile(sorted, 50))}, p99 ${ms(percentile(sorted, 99))}`;
const waitersText = (w: Window) =>
  `${w.meanWaiters.toFixed(1)} waiting on the lock on average, ≥ 1 waiting in ${(w.waitingShare * 100).toFixed(0)} % of samples` +
  (w.machineBusy === undefined ? '' : `; machine CPU ${(w.machineBusy * 100).toFixed(0)} % busy`) +
  // While the lock is never free, appends follow each other: one lasts 1 / rate from the lock to the commit.
  (w.waitingShare > 0.95 ? `; lock held ≈ ${ms(1000 / w.rate)} per append` : '');

/** Busy and total CPU time of the machine so far, from /proc/stat (Linux; undefined elsewhere). */
async function machineTimes(): Promise<{ busy: number; total: number } | undefined> {
  try {
    const fields = (await readFile('/proc/stat', 'utf8')).split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    // Fields 4 and 5 of the cpu line: idle and iowait.
    return { busy: total - fields[3] - fields[4], total };
  } catch {
    return undefined;
  }
}

/** Starts watching the machine's CPU; the answer is the busy share since then. */
async function watchMachine(): Promise<() => Promise<number | undefined>> {
  const before = await machineTimes();
  return async () => {
    const after = await machineTimes();
    if (!before || !after || after.total === before.total) return undefined;
    return (after.busy - before.busy) / (after.total - before.total);
  };
}

async function appendedCount(db: TestDatabase): Promise<number> {
  const [{ n }] = await db.query<{ n: string }>('SELECT count(*) AS n FROM audit_log');
  return Number(n);
}

/** Samples lock waits in the database until `stop()`; answers the mean waiters and the share of samples with any. */
function sampleLockWaits(db: TestDatabase): () => Promise<{ meanWaiters: number; waitingShare: number }> {
  const samples: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const [{ n }] = await db.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      samples.push(Number(n));
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
    }
  })();
  return async () => {
    running = false;
    await loop;
    return {
      meanWaiters: samples.reduce((a, b) => a + b, 0) / Math.max(1, samples.length),
      waitingShare: samples.filter((n) => n > 0).length / Math.max(1, samples.length),
    };
  };
}

/** Creates tokens from CLIENTS loops per replica until `until`; answers each creation's latency. */
async function createTokens(replicas: Replica[], until: number): Promise<number[]> {
  const latencies: number[] = [];
  await Promise.all(
    replicas.flatMap((replica) =>
      Array.from({ length: CLIENTS }, async () => {
        while (performance.now() < until) {
          const started = performance.now();
          const res = await replica.admin.post('/v1/tokens', {
            name: 'bench',
            scopes: ['mail:read'],
            mailboxes: ['*'],
          });
          if (res.status !== 201) throw new Error(`token creation failed: ${res.status} ${JSON.stringify(res.body)}`);
          latencies.push(performance.now() - started);
        }
      }),
    ),
  );
  return latencies;
}

/** A warm-up, then a counted window of token creations on `replicas`. */
async function tokenWindow(db: TestDatabase, replicas: Replica[]): Promise<Window> {
  await createTokens(replicas, performance.now() + WARMUP_SECONDS * 1000);
  const before = await appendedCount(db);
  const stopSampling = sampleLockWaits(db);
  const machine = await watchMachine();
  const started = performance.now();
  const latencies = await createTokens(replicas, started + SECONDS * 1000);
  const seconds = (performance.now() - started) / 1000;
  const machineBusy = await machine();
  const waits = await stopSampling();
  const appended = (await appendedCount(db)) - before;
  return { rate: appended / seconds, latencies: latencies.sort((a, b) => a - b), ...waits, machineBusy };
}

/** DECISIONS pending requests per replica, asked for through its MCP client, IN_FLIGHT at a time. */
async function pendingRequests(replicas: Replica[], mailboxId: string): Promise<string[][]> {
  return Promise.all(
    replicas.map((replica) =>
      mapInFlight(
        Array.from({ length: DECISIONS }, (_, i) => i),
        IN_FLIGHT,
        async (i) => {
          const created = await callOk<{ request_id: string }>(replica.client, 'request_approval', {
            mailbox_id: mailboxId,
            title: `Bench ${replica.name}-${i}`,
          });
          return created.request_id;
        },
      ),
    ),
  );
}

/** Every replica decides its pending requests, IN_FLIGHT at a time (approve and reject alternately). */
async function decisionBurst(db: TestDatabase, replicas: Replica[], pending: string[][]): Promise<Window> {
  const before = await appendedCount(db);
  const stopSampling = sampleLockWaits(db);
  const machine = await watchMachine();
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    replicas.map((replica, r) =>
      mapInFlight(pending[r], IN_FLIGHT, async (id, i) => {
        const sent = performance.now();
        const res = await replica.admin.post(`/v1/requests/${id}/${i % 2 === 0 ? 'approve' : 'reject'}`, {});
        if (res.status !== 200) throw new Error(`decision failed: ${res.status} ${JSON.stringify(res.body)}`);
        latencies.push(performance.now() - sent);
      }),
    ),
  );
  const seconds = (performance.now() - started) / 1000;
  const machineBusy = await machine();
  const waits = await stopSampling();
  const appended = (await appendedCount(db)) - before;
  return { rate: appended / seconds, latencies: latencies.sort((a, b) => a - b), ...waits, machineBusy };
}

interface AppendRun {
  rate: number;
  /** AuditLog.append alone: the wait for the lock, the read of the head, the write. */
  appendMs: number[];
  /** The whole transaction: BEGIN, the append, COMMIT (the lock is held from the append to here). */
  transactionMs: number[];
}

/** AuditLog.append from `connections` loops, each append in a transaction of its own. */
async function appendAlone(db: TestDatabase, connections: number): Promise<AppendRun> {
  const dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: connections } });
  await dataSource.initialize();
  const audit = new AuditLog();
  const loop = async (until: number, run?: AppendRun) => {
    await Promise.all(
      Array.from({ length: connections }, async (_, worker) => {
        for (let i = 0; performance.now() < until; i++) {
          const started = performance.now();
          await dataSource.transaction(async (manager) => {
            const appending = performance.now();
            await audit.append(manager, {
              action: 'policy_changed',
              actor: { system: 'bench' },
              subject: { worker, i },
            });
            run?.appendMs.push(performance.now() - appending);
          });
          run?.transactionMs.push(performance.now() - started);
        }
      }),
    );
  };
  try {
    await loop(performance.now() + WARMUP_SECONDS * 1000);
    const run: AppendRun = { rate: 0, appendMs: [], transactionMs: [] };
    const started = performance.now();
    await loop(started + SECONDS * 1000, run);
    run.rate = run.transactionMs.length / ((performance.now() - started) / 1000);
    run.appendMs.sort((a, b) => a - b);
    run.transactionMs.sort((a, b) => a - b);
    return run;
  } finally {
    await dataSource.destroy();
  }
}

async function main(): Promise<void> {
  const releaseDatabase = await databaseServer();
  const db = await createTestDatabase();
  const replicas = new ReplicaSet(db.url, randomSecret(), {
    ALCARTA_SMTP_PORT: 'off',
    ALCARTA_RATE_LIMIT_PER_SECOND: '0',
    ALCARTA_LOG_LEVEL: 'warn',
    ALCARTA_DB_POOL_SIZE: String(POOL_SIZE),
  });
  try {
    const running = [await replicas.start('A')]; // alone first: it runs the migrations
    for (let i = 1; i < REPLICAS; i++) running.push(await replicas.start(String.fromCharCode(65 + i)));
    const mailboxId = await createMailbox(running[0].admin, 'bench-audit@example.com');
    const rows: BenchRow[] = [];
    const tokenRow = (label: string, w: Window, setup: string) => {
      rows.push([label, setup, `**${w.rate.toFixed(0)} appends/s**; creation ${latencyText(w.latencies)}`, '—']);
      rows.push([`  lock waits, ${label}`, 'pg_stat_activity every 10 ms', waitersText(w), '—']);
    };
    const window = `${WARMUP_SECONDS} s warm-up + ${SECONDS} s`;

    const one = await tokenWindow(db, running.slice(0, 1));
    process.stderr.write(`token creations, 1 replica: ${one.rate.toFixed(0)}/s\n`);
    tokenRow('token creations, 1 replica', one, `${CLIENTS} REST clients, pool ${POOL_SIZE}, ${window}`);
    const all = await tokenWindow(db, running);
    process.stderr.write(`token creations, ${REPLICAS} replicas: ${all.rate.toFixed(0)}/s\n`);
    tokenRow(
      `token creations, ${REPLICAS} replicas`,
      all,
      `${CLIENTS} REST clients per replica, pool ${POOL_SIZE} each, ${window}`,
    );

    const creating = performance.now();
    const pending = await pendingRequests(running, mailboxId);
    const creatingSeconds = (performance.now() - creating) / 1000;
    const decided = await decisionBurst(db, running, pending);
    process.stderr.write(`decisions, ${REPLICAS} replicas: ${decided.rate.toFixed(0)}/s\n`);
    rows.push([
      `decisions, ${REPLICAS} replicas`,
      `${REPLICAS} × ${count(DECISIONS)} pending (made through MCP in ${creatingSeconds.toFixed(1)} s), decided over REST, ${IN_FLIGHT} in flight per replica`,
      `**${decided.rate.toFixed(0)} appends/s**; decision ${latencyText(decided.latencies)} (queueing included)`,
      '—',
    ]);
    rows.push([`  lock waits, decisions`, 'pg_stat_activity every 10 ms', waitersText(decided), '—']);

    for (const connections of [1, CONNECTIONS]) {
      const run = await appendAlone(db, connections);
      process.stderr.write(`append alone, ${connections} connections: ${run.rate.toFixed(0)}/s\n`);
      rows.push([
        `AuditLog.append alone, ${connections} connection${connections === 1 ? '' : 's'}`,
        `each append in its own transaction, bench process, ${window}`,
        `**${run.rate.toFixed(0)} appends/s**; append ${latencyText(run.appendMs)}, with its commit ${latencyText(run.transactionMs)}`,
        '—',
      ]);
    }

    const verified = await runCli(db.url, 'audit', 'verify');
    if (verified.code !== 0) throw new Error(`audit verify refused the chain: ${verified.stdout}${verified.stderr}`);
    rows.push(['chain after the run', '`audit verify`', verified.stdout.trim(), 'accepted']);
    printTable(`Audit head lock benchmark (${cpus().length} CPUs, ${cpus()[0]?.model ?? 'unknown CPU'})`, rows);
  } finally {
    await replicas.stopAll();
    await db.drop();
    await releaseDatabase();
  }
}

runBenchmark(main);
