/**
 * `npm run bench:waits`: the wait engine's figures on this machine (targets in brackets).
 * BENCH_PARKED (default 10,000) sets how many waits are parked at once.
 *
 *   parked capacity   BENCH_PARKED blocked message waits on one process; server RSS per parked wait [≤ 32 KiB]
 *   wake latency      ROUNDS rounds with the others parked, ingest HTTP response → waiter result; same
 *                     replica and across two [p50 ≤ 10 ms, p99 ≤ 50 ms]
 *   idle DB cost      transactions/s on the database with the waits parked, beside none [≤ 2/s]
 *   fan-out           one ingest into each of 20 mailboxes wakes them all; time to the last response [≤ 1 s]
 *   open sockets      BENCH_PARKED websocket waits with their sockets open on one process; RSS per socket
 *   socket fan-out    one ingest into each of 20 mailboxes resolves them all; time to the last `result` frame [≤ 2 s]
 *   socket latency    ROUNDS rounds, ingest HTTP response → `result` frame; same replica and across two
 *
 * BENCH_CPU_PROF=<dir> writes the servers' CPU profiles there (cpu-profile-preload.ts) and prints the
 * fan-out window on the profiles' clock; BENCH_ONLY=blocking skips the idle-rate and websocket rows.
 * The websocket rows run on a replica spawned for them (warmed up like the first), so that their
 * memory baseline is a resting process, not one still collecting the blocking phase's garbage.
 *
 * Uses DATABASE_URL's server if set (a fresh database on it), else a throwaway embedded PostgreSQL.
 * Servers are real `node dist/main.js` processes; the client speaks raw JSON-RPC over node:http (no
 * connect timeout, no pool limit) so that its own overhead stays small. Waits are opened
 * BENCH_OPEN_CONCURRENCY at a time (a call counts as open once its response headers arrived): the
 * rate a replica accepts new waits is part of the parked-capacity row.
 */
import { readFile } from 'node:fs/promises';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { Client } from 'pg';
import WebSocket from 'ws';
import { createTestDatabase, TestDatabase } from '../support/database';
import { activeWaits } from '../support/metrics';
import { spawnServer, SpawnedServer } from '../support/spawned-server';
import { randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { BenchRevision, rawCall, RawCall, toolResult } from './raw-mcp';
import { BenchRow, count, databaseServer, percentile, printTable, runBenchmark } from './report';
import { clusterBenchRows } from './waits-cluster';

const PARKED = Number(process.env.BENCH_PARKED ?? 10_000);
const OPEN_CONCURRENCY = Number(process.env.BENCH_OPEN_CONCURRENCY ?? 100);
/** Mailboxes the parked waits spread over; one more (the first) carries the latency rounds. */
const MAILBOXES = 20;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 100);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 20);
const STATS_LAG_MS = 11_000;
/** Parking thousands of waits on a busy 2-core machine takes a while. */
const PARK_TIMEOUT_MS = Math.max(120_000, PARKED * 30);
/** The parked waits' own timeout: they must outlast the parking and the measurements before the fan-out. */
const PARKED_WAIT_SECONDS = 3600;
const PROFILE_DIR = process.env.BENCH_CPU_PROF;
const BLOCKING_ONLY = process.env.BENCH_ONLY === 'blocking';

const token = randomSecret();
const rows: BenchRow[] = [];
/**
 * Agents keep their connections alive between calls, as the MCP SDK's fetch does: a parked call
 * holds its connection, and the next call reuses it. `closingClients` asks for a new connection
 * per call (`Connection: close`), for the fan-out row of clients that do that.
 */
// Each parked call stands for a client of its own, which keeps its connection: no cap on idle
// connections (Node's default, 256 per host, would close the rest after the fan-out's answers).
const keepAliveClients = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: Infinity });
const closingClients = new Agent({ keepAlive: false, maxSockets: Infinity });

function call(
  url: string,
  body: unknown,
  agent: Agent = keepAliveClients,
  revision: BenchRevision = '2025-11-25',
): RawCall {
  return rawCall(url, token, body, agent, revision);
}

async function post(url: string, body: unknown): Promise<string> {
  return call(url, body).body;
}

let rpcId = 0;
function awaitCall(
  server: SpawnedServer,
  args: Record<string, unknown>,
  agent?: Agent,
  revision?: BenchRevision,
): RawCall {
  return call(
    `${server.url}/mcp`,
    { jsonrpc: '2.0', id: ++rpcId, method: 'tools/call', params: { name: 'email_await', arguments: args } },
    agent,
    revision,
  );
}

/** A blocking message wait: `accepted` once the server took it, `result` once it answered. */
function messageWait(
  server: SpawnedServer,
  mailboxId: string,
  timeoutSeconds: number,
  agent?: Agent,
  revision?: BenchRevision,
): { accepted: Promise<void>; result: Promise<any> } {
  const { accepted, body } = awaitCall(
    server,
    { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: timeoutSeconds },
    agent,
    revision,
  );
  return { accepted, result: body.then(toolResult) };
}

/**
 * Starts `count` calls, at most `concurrency` of them not yet accepted at any time, and returns
 * what each started (in order) once the last one was started.
 */
async function startAll<T>(count: number, start: (i: number) => T & { accepted: Promise<void> }): Promise<T[]> {
  const started: T[] = [];
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const item = start(next++);
      started.push(item);
      await item.accepted;
    }
  };
  await Promise.all(Array.from({ length: Math.min(OPEN_CONCURRENCY, count) }, lane));
  return started;
}

type SocketResult = Promise<{ matched: boolean; at: number }>;

/** Creates a websocket wait; returns its websocket_url, aimed at the server that issued it. */
async function createSocketWait(server: SpawnedServer, mailboxId: string, timeoutSeconds: number): Promise<URL> {
  const descriptor = toolResult(
    await awaitCall(server, {
      event: { type: 'message_received', mailbox_id: mailboxId },
      timeout_seconds: timeoutSeconds,
      delivery: 'websocket',
    }).body,
  );
  // The servers run on ports picked at spawn time, so ALCARTA_PUBLIC_URL keeps its default: aim the
  // URL at the server that issued it.
  const url = new URL(descriptor.websocket_url);
  url.host = new URL(server.url).host;
  return url;
}

/** Opens a wait's socket; resolves once `ready` arrived, with the result frame to come. */
async function openSocket(url: URL): Promise<{ result: SocketResult }> {
  const socket = new WebSocket(url);
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  const result = new Promise<{ matched: boolean; at: number }>((resolve, reject) => {
    socket.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString());
      if (frame.type === 'ready') ready();
      if (frame.type === 'result') resolve({ matched: frame.matched, at: performance.now() });
    });
    socket.on('error', reject);
  });
  await isReady;
  return { result };
}

async function ingest(server: SpawnedServer, mailboxId: string): Promise<void> {
  await post(`${server.url}/v1/mailboxes/${mailboxId}/messages`, {
    from: 'bench@example.org',
    to: ['agent@example.com'],
    subject: 'bench',
    text: 'bench',
  });
}

async function rssKiB(pid: number): Promise<number> {
  return Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]);
}

/** CPU time (user + system) the process used so far, from /proc (clock ticks of 10 ms). */
async function cpuMs(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function transactions(db: TestDatabase, name: string): Promise<number> {
  const admin = new Client({ connectionString: db.url });
  await admin.connect();
  try {
    await admin.query('SELECT pg_stat_force_next_flush()');
    await admin.query('SELECT pg_stat_clear_snapshot()');
    const [row] = (
      await admin.query<{ n: string }>(
        'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1',
        [name],
      )
    ).rows;
    return Number(row.n);
  } finally {
    await admin.end();
  }
}

async function wakeLatency(
  waitOn: SpawnedServer,
  ingestVia: SpawnedServer,
  mailboxId: string,
  alsoParked: number,
): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    let woke = 0;
    const waiting = messageWait(waitOn, mailboxId, 30).result.then((r) => {
      woke = performance.now();
      return r;
    });
    await waitFor('the wait to park', async () => (await activeWaits(waitOn.url)) === alsoParked + 1, {
      intervalMs: 5,
    });
    await ingest(ingestVia, mailboxId);
    const answered = performance.now();
    const result = await waiting;
    if (!result.matched) throw new Error(`round ${i}: not matched`);
    samples.push(Math.max(0, woke - answered));
  }
  return samples.sort((a, b) => a - b);
}

async function socketLatency(waitOn: SpawnedServer, ingestVia: SpawnedServer, mailboxId: string): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const { result } = await openSocket(await createSocketWait(waitOn, mailboxId, 30));
    await ingest(ingestVia, mailboxId);
    const answered = performance.now();
    const { matched, at } = await result;
    if (!matched) throw new Error(`round ${i}: not matched`);
    samples.push(Math.max(0, at - answered));
  }
  return samples.sort((a, b) => a - b);
}

/** A table row for sorted latency samples against the target (p50 ≤ 10 ms, p99 ≤ 50 ms). */
function latencyRow(label: string, measured: string, samples: number[]): BenchRow {
  const p50 = percentile(samples, 50);
  const p99 = percentile(samples, 99);
  return [
    label,
    `${ROUNDS} rounds, ${measured}`,
    `p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`,
    p50 <= 10 && p99 <= 50 ? 'met (p50 ≤ 10, p99 ≤ 50 ms)' : 'MISSED (p50 ≤ 10, p99 ≤ 50 ms)',
  ];
}

/** A line on stderr, so a long run shows where it is (the table goes to stdout at the end). */
function progress(step: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${step}\n`);
}

/**
 * Runs the code paths the measurements use once (message waits, and a websocket wait per mailbox
 * to its result) and opens the database pool's connections (they open on first use; a burst on a
 * cold pool on a busy machine can wait past the pool's 3 s connect timeout).
 */
/**
 * Runs each measured path a little on a fresh replica (JIT, the database pool's connections), as on
 * a server that has been running a while: waits that time out, blocking waits woken by a commit
 * (with both kinds of client), websocket waits resolved by a commit. Few enough that the heap they
 * leave behind does not hide part of the memory measured next.
 */
async function warmUpReplica(
  server: SpawnedServer,
  mailboxes: readonly string[],
  revision: BenchRevision = '2025-11-25',
): Promise<void> {
  const wakeAll = () => Promise.all(mailboxes.map((m) => ingest(server, m)));
  const wait = (i: number, timeoutSeconds: number, agent?: Agent) =>
    messageWait(server, mailboxes[i % mailboxes.length], timeoutSeconds, agent, revision);
  for (let i = 0; i < 20; i++) await wait(i, 0).result;
  const waits = await startAll(200, (i) => wait(i, 0));
  await Promise.all(waits.map((w) => w.result));
  for (const agent of [keepAliveClients, closingClients]) {
    const woken = await startAll(200, (i) => wait(i, 60, agent));
    await waitFor('the warm-up waits to park', async () => (await activeWaits(server.url)) === 200, {
      intervalMs: 50,
    });
    await wakeAll();
    await Promise.all(woken.map((w) => w.result));
  }
  const sockets = await Promise.all(
    mailboxes.map(async (m) => openSocket(await createSocketWait(server, m, PARKED_WAIT_SECONDS))),
  );
  await wakeAll();
  await Promise.all(sockets.map((s) => s.result));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const releaseDatabase = await databaseServer();
  const db = await createTestDatabase();
  const dbName = new URL(db.url).pathname.slice(1);
  const env = {
    DATABASE_URL: db.url,
    ALCARTA_BOOTSTRAP_TOKEN: token,
    ALCARTA_LOG_LEVEL: 'warn',
    ALCARTA_DB_POOL_SIZE: '10',
    // One token opens thousands of waits at once: a load test, not a client to protect others from.
    ALCARTA_RATE_LIMIT_PER_SECOND: '0',
    // Parking 10,000 waits on a busy machine can take longer than the default 300 s cap.
    ALCARTA_MAX_MESSAGE_WAIT_SECONDS: String(PARKED_WAIT_SECONDS),
    // All the websocket waits are created before the first socket opens: creating 10,000 takes
    // longer than the default 30 s connect window of the first tickets (410 Gone).
    ALCARTA_WS_CONNECT_TTL_SECONDS: '3600',
    ...(PROFILE_DIR ? { NODE_OPTIONS: `--require ${join(__dirname, 'cpu-profile-preload.js')}` } : {}),
  };
  const a = await spawnServer(env);
  const b = await spawnServer(env);
  let c: SpawnedServer | undefined;
  let server2026: SpawnedServer | undefined;
  try {
    const mailboxes: string[] = [];
    for (let i = 0; i <= MAILBOXES; i++) {
      mailboxes.push(JSON.parse(await post(`${a.url}/v1/mailboxes`, { address: `bench-${i}@example.com` })).mailbox_id);
    }
    const [latencyMailbox, ...parkMailboxes] = mailboxes;

    /** Transactions per second on the database over IDLE_SECONDS, as things stand. */
    const idleRate = async () => {
      // Idle backends publish their statistics up to 10 s late: let what came before settle before
      // the first reading, and count the lag after the window as part of it.
      await sleep(STATS_LAG_MS);
      const t0 = await transactions(db, dbName);
      await sleep(IDLE_SECONDS * 1000 + STATS_LAG_MS);
      const t1 = await transactions(db, dbName);
      // Each reading itself is one transaction on this database.
      return (t1 - t0 - 1) / (IDLE_SECONDS + STATS_LAG_MS / 1000);
    };

    // Warm up the code paths and the database pool (its connections open on first use), then
    // measure the resting size and the database's idle rate.
    await warmUpReplica(a, parkMailboxes);
    progress('warmed up; idle database rate with none parked');
    const idleNone = BLOCKING_ONLY ? NaN : await idleRate();
    /**
     * Parks PARKED blocking waits of `revision` on `server` (warmed up and resting) and adds the
     * parked-capacity row: the server's RSS growth per parked wait.
     */
    const parkedCapacity = async (server: SpawnedServer, revision: BenchRevision, label: string) => {
      const before = await rssKiB(server.pid);
      progress(`parking ${PARKED} waits at ${revision}`);
      const opening = performance.now();
      const waits = await startAll(PARKED, (i) =>
        messageWait(server, parkMailboxes[i % MAILBOXES], PARKED_WAIT_SECONDS, keepAliveClients, revision),
      );
      await waitFor(`${PARKED} parked waits`, async () => (await activeWaits(server.url)) === PARKED, {
        timeoutMs: PARK_TIMEOUT_MS,
        intervalMs: 200,
      });
      const openSeconds = (performance.now() - opening) / 1000;
      await sleep(2000);
      const after = await rssKiB(server.pid);
      const perWait = (after - before) / PARKED;
      rows.push([
        label,
        `${count(PARKED)} waits opened ${OPEN_CONCURRENCY} at a time, all parked in ${openSeconds.toFixed(1)} s (${(PARKED / openSeconds).toFixed(0)}/s); server RSS ${(before / 1024).toFixed(0)} → ${(after / 1024).toFixed(0)} MiB`,
        `${perWait.toFixed(1)} KiB per wait`,
        perWait <= 32 ? 'met (≤ 32 KiB)' : 'MISSED (≤ 32 KiB)',
      ]);
      return waits;
    };
    const parked = await parkedCapacity(a, '2025-11-25', 'parked capacity');

    progress('wake latency rounds');
    for (const [label, waitOn, via] of [
      ['wake latency, same replica', a, a],
      ['wake latency, across replicas', a, b],
    ] as const) {
      const samples = await wakeLatency(waitOn, via, latencyMailbox, PARKED);
      rows.push(latencyRow(label, `${count(PARKED)} others parked, ingest response → wait result`, samples));
    }

    progress('idle database rate with the waits parked');
    const idleParked = BLOCKING_ONLY ? NaN : await idleRate();
    if (!BLOCKING_ONLY)
      rows.push([
        'idle database cost',
        `${IDLE_SECONDS} s with ${count(PARKED)} parked waits (beside: none parked)`,
        `${idleParked.toFixed(2)} tx/s (beside ${idleNone.toFixed(2)} tx/s)`,
        idleParked <= 2 ? 'met (≤ 2/s)' : 'MISSED (≤ 2/s)',
      ]);

    // CLOCK_MONOTONIC in µs, the clock of the servers' CPU profiles.
    const profileClock = () => (process.hrtime.bigint() / 1000n).toString();
    /** Wakes the waits parked on `server` with one ingest into each mailbox and adds the row. */
    const fanOut = async (waits: typeof parked, clients: string, server: SpawnedServer = a) => {
      progress(`fan-out, ${clients}`);
      const window = profileClock();
      const cpuBefore = await cpuMs(server.pid);
      const started = performance.now();
      await Promise.all(parkMailboxes.map((m) => ingest(server, m)));
      const results = await Promise.all(waits.map((w) => w.result));
      const elapsed = performance.now() - started;
      // CPU time is steadier than wall time on a shared machine: compare runs by it.
      progress(
        `fan-out: ${elapsed.toFixed(0)} ms, server CPU ${((await cpuMs(server.pid)) - cpuBefore).toFixed(0)} ms`,
      );
      if (PROFILE_DIR)
        progress(`fan-out window on the profile clock: ${window}..${profileClock()} µs (server ${server.pid})`);
      const matched = results.filter((r) => r.matched).length;
      rows.push([
        `fan-out, ${clients}`,
        `1 ingest into each of ${MAILBOXES} mailboxes wakes ${count(PARKED)} waits (${count(matched)} matched)`,
        `${elapsed.toFixed(0)} ms to the last response`,
        elapsed <= 1000 && matched === PARKED ? 'met (≤ 1 s)' : 'MISSED (≤ 1 s)',
      ]);
    };
    await fanOut(parked, 'keep-alive clients');
    // The same with clients that take a new connection per call: each answer also closes its
    // connection (shutdown, FIN, close) inside the window.
    const parkedClosing = await startAll(PARKED, (i) =>
      messageWait(a, parkMailboxes[i % MAILBOXES], PARKED_WAIT_SECONDS, closingClients),
    );
    await waitFor(`${PARKED} parked waits`, async () => (await activeWaits(a.url)) === PARKED, {
      timeoutMs: PARK_TIMEOUT_MS,
      intervalMs: 200,
    });
    await fanOut(parkedClosing, 'Connection: close clients');
    // The keep-alive connections of the first fan-out stay idle until the server's keep-alive
    // timeout; closing them now keeps their teardown out of what follows.
    keepAliveClients.destroy();

    // The same blocking waits at 2026-07-28 (the `_meta` envelope and the standard headers), on a
    // replica of their own warmed up with calls of that revision, so that the two eras' memory per
    // parked wait compare in one run.
    await a.stop();
    server2026 = await spawnServer(env);
    await warmUpReplica(server2026, parkMailboxes, '2026-07-28');
    // The warm-up's idle connections would reach the server's keep-alive timeout (5 s) about when
    // the parking reuses them, and a request written into a closing connection gets ECONNRESET.
    keepAliveClients.destroy();
    await sleep(2000);
    const parked2026 = await parkedCapacity(server2026, '2026-07-28', 'parked capacity, 2026-07-28');
    await fanOut(parked2026, 'keep-alive clients, 2026-07-28', server2026);
    keepAliveClients.destroy();
    await server2026.stop();

    if (BLOCKING_ONLY) return printTable('Wait engine benchmark', rows);
    // Websocket waits, on a replica of their own (the first one's blocking waits are gone but their
    // memory would be collected meanwhile, and RSS would seem to shrink): warmed up like the first,
    // websocket path included. The stored waits are watched first, then their sockets opened, so
    // the difference is what an open socket costs.
    c = await spawnServer(env);
    await warmUpReplica(c, parkMailboxes);
    await sleep(2000);
    const beforeWaits = await rssKiB(c.pid);
    progress(`creating ${PARKED} websocket waits`);
    const creating = performance.now();
    const created = await startAll(PARKED, (i) => {
      const url = createSocketWait(c!, parkMailboxes[i % MAILBOXES], PARKED_WAIT_SECONDS);
      return { url, accepted: url.then(() => undefined) };
    });
    const urls = await Promise.all(created.map((w) => w.url));
    await waitFor(
      `${PARKED} watched waits`,
      async () => (await activeWaits(c!.url, undefined, 'persisted')) === PARKED,
      { timeoutMs: PARK_TIMEOUT_MS, intervalMs: 200 },
    );
    const createSeconds = (performance.now() - creating) / 1000;
    await sleep(2000);
    const beforeSockets = await rssKiB(c.pid);
    const opened = await startAll(PARKED, (i) => {
      const socket = openSocket(urls[i]);
      return { socket, accepted: socket.then(() => undefined) };
    });
    const sockets = await Promise.all(opened.map((o) => o.socket));
    await waitFor(
      `${PARKED} open sockets`,
      async () => (await activeWaits(c!.url, undefined, 'websocket')) === PARKED,
      {
        timeoutMs: PARK_TIMEOUT_MS,
        intervalMs: 200,
      },
    );
    await sleep(2000);
    const afterSockets = await rssKiB(c.pid);
    const perWatch = (beforeSockets - beforeWaits) / PARKED;
    const perSocket = (afterSockets - beforeSockets) / PARKED;
    rows.push([
      'open sockets',
      `${count(PARKED)} websocket waits created in ${createSeconds.toFixed(1)} s on a fresh replica, sockets open; server RSS ${(beforeWaits / 1024).toFixed(0)} (warmed up) → ${(beforeSockets / 1024).toFixed(0)} MiB (stored waits watched) → ${(afterSockets / 1024).toFixed(0)} MiB (sockets open)`,
      `${perWatch.toFixed(1)} KiB per watched stored wait, + ${perSocket.toFixed(1)} KiB per open socket`,
      '(no target)',
    ]);
    progress('socket fan-out');
    const socketsStarted = performance.now();
    await Promise.all(parkMailboxes.map((m) => ingest(c!, m)));
    const socketResults = await Promise.all(sockets.map((s) => s.result));
    const socketFanOut = performance.now() - socketsStarted;
    const socketsMatched = socketResults.filter((r) => r.matched).length;
    rows.push([
      'socket fan-out',
      `1 ingest into each of ${MAILBOXES} mailboxes resolves ${count(PARKED)} websocket waits (${count(socketsMatched)} matched)`,
      `${socketFanOut.toFixed(0)} ms to the last result frame`,
      socketFanOut <= 2000 && socketsMatched === PARKED ? 'met (≤ 2 s)' : 'MISSED (≤ 2 s)',
    ]);
    for (const [label, waitOn, via] of [
      ['socket latency, same replica', c, c],
      ['socket latency, across replicas', c, b],
    ] as const) {
      rows.push(latencyRow(label, 'ingest response → result frame', await socketLatency(waitOn, via, latencyMailbox)));
    }
    rows.push(
      ...(await clusterBenchRows({
        env,
        token,
        parked: PARKED,
        openConcurrency: OPEN_CONCURRENCY,
        rounds: ROUNDS,
        waitSeconds: PARKED_WAIT_SECONDS,
        parkTimeoutMs: PARK_TIMEOUT_MS,
        progress,
      })),
    );
  } finally {
    await a.stop();
    await b.stop();
    await c?.stop();
    await server2026?.stop();
    await db.drop();
    await releaseDatabase();
  }

  printTable('Wait engine benchmark', rows);
}

runBenchmark(main);
