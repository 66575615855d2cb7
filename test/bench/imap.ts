/**
 * `npm run bench:imap`: connected mailboxes (IMAP IDLE) on one replica against Debian's Dovecot.
 *
 *   RSS per connection   MAILBOXES connected mailboxes (one INBOX each) signed in and idle; replica RSS
 *                        before (warmed up) and after, divided by MAILBOXES (Dovecot's processes not counted)
 *   APPEND → wake        ROUNDS sequential APPENDs (from a second IMAP client) round-robin over WAITERS
 *                        mailboxes, each with a blocking email_await parked; APPEND's OK → wait result
 *   reconnect storm      Dovecot stopped (every connection dropped), then started: time until every
 *                        source is idle again, and until mail appended right after the start wakes its waits
 *   initial sync         INITIAL_MESSAGES messages already in an account connected with sync_from "all":
 *                        duration and the replica's RSS growth (BENCH_INITIAL_MESSAGES=0 skips it)
 *
 * Knobs: BENCH_MAILBOXES (500), BENCH_WAITERS (50), BENCH_ROUNDS (200), BENCH_INITIAL_MESSAGES (10,000),
 * BENCH_CREATE_CONCURRENCY (8). Uses DATABASE_URL's server if set (a fresh database on it), else a
 * throwaway embedded PostgreSQL. The replica is a real `node dist/main.js` process with the
 * defaults of the ALCARTA_IMAP_* settings; the MCP client is the raw one of raw-mcp.ts.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Agent } from 'node:http';
import { ImapFlow } from 'imapflow';
import { rawMail, secretsKey } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { createTestDatabase } from '../support/database';
import { activeWaits, metricValue } from '../support/metrics';
import { spawnServer, SpawnedServer } from '../support/spawned-server';
import { randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { rawCall, toolResult } from './raw-mcp';
import { BenchRow, count, databaseServer, percentile, printTable, runBenchmark } from './report';

const MAILBOXES = Number(process.env.BENCH_MAILBOXES ?? 500);
const WAITERS = Math.min(MAILBOXES, Number(process.env.BENCH_WAITERS ?? 50));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200);
const INITIAL_MESSAGES = Number(process.env.BENCH_INITIAL_MESSAGES ?? 10_000);
const CREATE_CONCURRENCY = Number(process.env.BENCH_CREATE_CONCURRENCY ?? 8);
/** Connected mailboxes used before the baseline is read, so that it is a replica that has synced mail. */
const WARM_UP_MAILBOXES = 5;
/** Parked waits outlast the latency rounds and the storm after them. */
const WAIT_SECONDS = 1800;
/** A busy 2-core machine signs 500 accounts in and out in well under this. */
const STATE_TIMEOUT_MS = Math.max(180_000, MAILBOXES * 600);

const token = randomSecret();
const rows: BenchRow[] = [];
const clients = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: Infinity });

interface Account {
  username: string;
  password: string;
  mailboxId: string;
}

/** Progress on stderr: a run of 500 takes minutes. */
function progress(message: string): void {
  process.stderr.write(`[bench:imap ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

async function rssKiB(pid: number): Promise<number> {
  return Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]);
}

const mib = (kib: number) => (kib / 1024).toFixed(0);
const seconds = (ms: number) => (ms / 1000).toFixed(1);

async function rest(server: SpawnedServer, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** Folders held by the replica in `state`, from its /metrics. */
function folders(server: SpawnedServer, state: string): Promise<number> {
  return metricValue(server.url, 'alcarta_imap_connections', { state });
}

/** Waits until `count` folders are in `state`; returns when that was first seen (performance.now()). */
async function foldersReach(server: SpawnedServer, state: string, wanted: number): Promise<number> {
  return waitFor(
    `${wanted} connected folders to be ${state}`,
    async () => ((await folders(server, state)) === wanted ? performance.now() : undefined),
    { timeoutMs: STATE_TIMEOUT_MS, intervalMs: 100 },
  );
}

async function addAccounts(dovecot: TestDovecot, n: number, prefix: string): Promise<Omit<Account, 'mailboxId'>[]> {
  const accounts: Array<Omit<Account, 'mailboxId'>> = [];
  for (let i = 0; i < n; i++) {
    const account = { username: `${prefix}-${i}@example.test`, password: `pw-${randomBytes(12).toString('hex')}` };
    await dovecot.addUser(account.username, account.password);
    accounts.push(account);
  }
  return accounts;
}

/** Connects a mailbox to each account through REST, CREATE_CONCURRENCY at a time (each create signs in first). */
async function connect(
  server: SpawnedServer,
  dovecot: TestDovecot,
  accounts: Array<Omit<Account, 'mailboxId'>>,
  extra: Record<string, unknown> = {},
): Promise<Account[]> {
  const connected: Account[] = new Array(accounts.length);
  let next = 0;
  const worker = async () => {
    while (next < accounts.length) {
      const i = next++;
      const { username, password } = accounts[i];
      const created = await rest(server, 'POST', '/v1/mailboxes', {
        address: username,
        source: {
          kind: 'imap',
          host: dovecot.host,
          port: dovecot.imapPort,
          tls: 'none',
          username,
          auth: { password },
          ...extra,
        },
      });
      connected[i] = { username, password, mailboxId: created.mailbox_id };
    }
  };
  await Promise.all(Array.from({ length: CREATE_CONCURRENCY }, worker));
  return connected;
}

type ParkedWait = Promise<{ at: number; result: any }>;

let rpcId = 0;
/** A blocking email_await for the next message of `mailboxId`; resolves with when its result arrived. */
function parkWait(server: SpawnedServer, mailboxId: string): ParkedWait {
  const call = rawCall(
    `${server.url}/mcp`,
    token,
    {
      jsonrpc: '2.0',
      id: ++rpcId,
      method: 'tools/call',
      params: {
        name: 'email_await',
        arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: WAIT_SECONDS },
      },
    },
    clients,
  );
  const parked = call.body.then((text) => ({ at: performance.now(), result: toolResult(text) }));
  // Failures surface where the wait is awaited; one never awaited (the run failed earlier) is not a crash.
  parked.catch(() => undefined);
  return parked;
}

function subjectsOf(result: any): string[] {
  if (!result.matched) throw new Error(`a wait ended unmatched: ${JSON.stringify(result).slice(0, 400)}`);
  return (result.events as Array<{ subject: string }>).map((e) => e.subject);
}

/** The latency rounds; returns the waits parked after the last round (one per waiter). */
async function wakeLatency(server: SpawnedServer, dovecot: TestDovecot, waiters: Account[]): Promise<ParkedWait[]> {
  // The delivering client's sessions are signed in before the rounds: the rounds time APPENDs only.
  for (const w of waiters) await dovecot.createFolder(w.username, 'INBOX');
  const parked = waiters.map((w) => parkWait(server, w.mailboxId));
  await waitFor('the waits to park', async () => (await activeWaits(server.url, 'message')) === waiters.length);
  const samples: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const i = round % waiters.length;
    const subject = `round ${round}`;
    await dovecot.append(waiters[i].username, 'INBOX', rawMail({ to: waiters[i].username, subject }));
    const appended = performance.now();
    const { at, result } = await parked[i];
    if (!subjectsOf(result).includes(subject)) throw new Error(`round ${round} woke with ${JSON.stringify(result)}`);
    // IDLE may report the message before the APPEND's OK is read: that counts as 0.
    samples.push(Math.max(0, at - appended));
    parked[i] = parkWait(server, waiters[i].mailboxId);
    await waitFor('the wait to park again', async () => (await activeWaits(server.url, 'message')) === waiters.length, {
      intervalMs: 5,
    });
  }
  samples.sort((a, b) => a - b);
  rows.push([
    'APPEND → woken email_await',
    `${ROUNDS} sequential APPENDs (imapflow, plain IMAP) round-robin over ${WAITERS} mailboxes, each with a parked email_await, ${count(MAILBOXES)} connected in IDLE`,
    `p50 ${percentile(samples, 50).toFixed(1)} ms, p99 ${percentile(samples, 99).toFixed(1)} ms, max ${samples[samples.length - 1].toFixed(1)} ms`,
    '',
  ]);
  return parked;
}

/**
 * The same rounds seen by a bare imapflow client in IDLE on one account: APPEND's OK → its EXISTS.
 * What Dovecot itself takes to tell an IDLE client of new mail, beside which Alcarta's share shows.
 */
async function bareIdleLatency(dovecot: TestDovecot, account: Account): Promise<void> {
  const client = new ImapFlow({
    host: dovecot.host,
    port: dovecot.imapPort,
    secure: false,
    doSTARTTLS: false,
    auth: { user: account.username, pass: account.password },
    logger: false,
  });
  client.on('error', () => undefined);
  await client.connect();
  const samples: number[] = [];
  try {
    await client.mailboxOpen('INBOX', { readOnly: true });
    let seen = 0;
    let existsAt = 0;
    client.on('exists', () => {
      seen++;
      existsAt = performance.now();
    });
    // IDLE stays on across EXISTS responses until the next command (the logout).
    void client.idle().catch(() => undefined);
    const rounds = Math.min(ROUNDS, 50);
    for (let round = 0; round < rounds; round++) {
      const before = seen;
      await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: `bare ${round}` }));
      const appended = performance.now();
      await waitFor('EXISTS at the bare IDLE client', () => seen > before, { intervalMs: 1 });
      samples.push(Math.max(0, existsAt - appended));
    }
  } finally {
    await client.logout().catch(() => client.close());
  }
  samples.sort((a, b) => a - b);
  rows.push([
    'APPEND → EXISTS at a bare IDLE client',
    `the same APPENDs, ${samples.length} rounds, seen by a plain imapflow client in IDLE on one account (no Alcarta): Dovecot's own share`,
    `p50 ${percentile(samples, 50).toFixed(1)} ms, p99 ${percentile(samples, 99).toFixed(1)} ms`,
    '',
  ]);
}

/** The replica's "connected folder unavailable" log lines, counted by their error with digits masked. */
function failureSummary(log: string): string {
  const counts = new Map<string, number>();
  for (const line of log.split('\n')) {
    if (!line.includes('connected folder unavailable')) continue;
    let error: string;
    try {
      const logged = (JSON.parse(line) as { error?: unknown }).error;
      error = typeof logged === 'string' ? logged : JSON.stringify(logged);
    } catch {
      error = line.slice(0, 200);
    }
    const key = error.replace(/\d+/g, 'N');
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([error, n]) => `  ${n} × ${error}`).join('\n');
}

/** Restarts Dovecot with `parked` (one wait per waiter) blocked across the restart. */
async function reconnectStorm(
  server: SpawnedServer,
  dovecot: TestDovecot,
  waiters: Account[],
  parked: ParkedWait[],
  total: number,
): Promise<void> {
  const authFailuresBefore = await metricValue(server.url, 'alcarta_imap_auth_failures_total');
  const stopping = performance.now();
  await dovecot.stop();
  const stopped = performance.now();
  const down = await foldersReach(server, 'unreachable', total);
  const starting = performance.now();
  await dovecot.start();
  const started = performance.now();
  // Mail that arrives while the replica is still reconnecting: it must be found by the catch-up.
  const subjects = waiters.map((_, i) => `after restart ${i}`);
  await Promise.all(
    waiters.map((w, i) => dovecot.append(w.username, 'INBOX', rawMail({ to: w.username, subject: subjects[i] }))),
  );
  const appended = performance.now();
  const woken = await Promise.all(
    parked.map(async (p, i) => {
      const { at, result } = await p;
      if (!subjectsOf(result).includes(subjects[i])) throw new Error(`a wait woke with ${JSON.stringify(result)}`);
      return at;
    }),
  );
  const allIdle = await foldersReach(server, 'idle', total);
  progress(`why reconnects failed during the storm (the replica's warnings):\n${failureSummary(server.stdout())}`);
  const authFailures = (await metricValue(server.url, 'alcarta_imap_auth_failures_total')) - authFailuresBefore;
  rows.push([
    'reconnect storm',
    `Dovecot stopped (${seconds(stopped - stopping)} s; all ${count(total)} folders \`unreachable\` ${seconds(down - stopping)} s after the stop began) and started (${seconds(started - starting)} s to listen); ALCARTA_IMAP_RETRY_MAX_SECONDS 300 (default)`,
    `**all ${count(total)} idle ${seconds(allIdle - started)} s after Dovecot listened**; ${WAITERS} messages APPENDed right after the start (done in ${seconds(appended - started)} s) woke their waits within ${seconds(Math.max(...woken) - started)} s of it; ${authFailures} sign-ins refused`,
    '',
  ]);
}

async function initialSync(server: SpawnedServer, dovecot: TestDovecot, total: number): Promise<void> {
  const [account] = await addAccounts(dovecot, 1, 'bench-initial');
  const body = `${'Initial sync body line of about seventy characters, quite ordinary.\n'.repeat(28)}`;
  const appendStart = performance.now();
  await dovecot.appendMany(
    account.username,
    'INBOX',
    Array.from({ length: INITIAL_MESSAGES }, (_, i) => rawMail({ to: account.username, subject: `old ${i}`, body })),
  );
  const appendSeconds = (performance.now() - appendStart) / 1000;
  const syncedBefore = await metricValue(server.url, 'alcarta_imap_messages_synced_total', { phase: 'initial' });
  const rssBefore = await rssKiB(server.pid);
  let peak = rssBefore;
  const sampler = setInterval(() => {
    rssKiB(server.pid).then(
      (kib) => (peak = Math.max(peak, kib)),
      () => undefined,
    );
  }, 200);
  const started = performance.now();
  try {
    await connect(server, dovecot, [account], { sync_from: 'all' });
    await waitFor(
      `${INITIAL_MESSAGES} messages to be synced`,
      async () =>
        (await metricValue(server.url, 'alcarta_imap_messages_synced_total', { phase: 'initial' })) - syncedBefore >=
          INITIAL_MESSAGES && (await folders(server, 'idle')) === total + 1,
      { timeoutMs: Math.max(300_000, INITIAL_MESSAGES * 60), intervalMs: 100 },
    );
  } finally {
    clearInterval(sampler);
  }
  const took = (performance.now() - started) / 1000;
  const rssAfter = await rssKiB(server.pid);
  rows.push([
    'initial sync',
    `one account with ${count(INITIAL_MESSAGES)} messages of ≈ 2.3 KiB (APPENDed in ${appendSeconds.toFixed(0)} s) connected with \`sync_from: "all"\`, ${count(total)} others idle`,
    `${took.toFixed(1)} s (${(INITIAL_MESSAGES / took).toFixed(0)} messages/s); replica RSS ${mib(rssBefore)} → peak ${mib(peak)} → ${mib(rssAfter)} MiB after`,
    '',
  ]);
}

/**
 * Each Dovecot IMAP session in IDLE takes an inotify instance of the user Dovecot's processes run
 * as; past fs.inotify.max_user_instances (128 by default on Linux) Dovecot logs "Inotify instance
 * limit … exceeded, disabling" and looks for new mail only every mailbox_idle_check_interval (30 s),
 * so the latency rows would measure that poll. The limit is the host's: fail early, saying so.
 */
async function checkInotifyLimit(sessions: number): Promise<void> {
  const limit = Number((await readFile('/proc/sys/fs/inotify/max_user_instances', 'utf8')).trim());
  if (limit < sessions) {
    throw new Error(
      `fs.inotify.max_user_instances is ${limit}, below the ${sessions} IDLE sessions Dovecot will hold: ` +
        `raise it (as root: sysctl fs.inotify.max_user_instances=${2 ** Math.ceil(Math.log2(sessions))})`,
    );
  }
}

async function main(): Promise<void> {
  const connections = MAILBOXES + WAITERS + WARM_UP_MAILBOXES + 50;
  await checkInotifyLimit(connections);
  const releaseDatabase = await databaseServer();
  const db = await createTestDatabase();
  const dovecot = await startDovecot({ connections });
  let server: SpawnedServer | undefined;
  try {
    const warmUp = await addAccounts(dovecot, WARM_UP_MAILBOXES, 'bench-warm');
    const accounts = await addAccounts(dovecot, MAILBOXES, 'bench');
    server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_BOOTSTRAP_TOKEN: token,
      ALCARTA_SECRETS_KEY: secretsKey(),
      ALCARTA_LOG_LEVEL: 'warn',
      ALCARTA_RATE_LIMIT_PER_SECOND: '0',
      ALCARTA_MAX_MESSAGE_WAIT_SECONDS: String(WAIT_SECONDS),
    });

    // Warm-up: a few connected mailboxes go through sign-in, IDLE, a live message and a woken wait.
    const warm = await connect(server, dovecot, warmUp);
    await foldersReach(server, 'idle', WARM_UP_MAILBOXES);
    const warmWaits = warm.map((w) => parkWait(server!, w.mailboxId));
    await waitFor('the warm-up waits to park', async () => (await activeWaits(server!.url, 'message')) === warm.length);
    for (const w of warm) await dovecot.append(w.username, 'INBOX', rawMail({ to: w.username, subject: 'warm' }));
    await Promise.all(warmWaits);

    const rssBefore = await rssKiB(server.pid);
    progress(`warmed up; connecting ${MAILBOXES} mailboxes`);
    const creating = performance.now();
    const connected = await connect(server, dovecot, accounts);
    const created = performance.now();
    const total = WARM_UP_MAILBOXES + MAILBOXES;
    const idle = await foldersReach(server, 'idle', total);
    const rssAfter = await rssKiB(server.pid);
    const states = new Set(
      (await Promise.all(connected.map((a) => rest(server!, 'GET', `/v1/mailboxes/${a.mailboxId}`)))).map(
        (view) => view.source?.state,
      ),
    );
    if (states.size !== 1 || !states.has('idle')) throw new Error(`sources not all idle: ${[...states].join(', ')}`);
    rows.push([
      'RSS per connected mailbox',
      `${count(MAILBOXES)} mailboxes created through REST (${CREATE_CONCURRENCY} at a time, each signs in first: ${seconds(created - creating)} s), all \`idle\` ${seconds(idle - creating)} s after the first create; replica RSS ${mib(rssBefore)} → ${mib(rssAfter)} MiB (Dovecot's processes not counted)`,
      `**${((rssAfter - rssBefore) / MAILBOXES).toFixed(1)} KiB per connection**`,
      '',
    ]);

    progress(`all idle; ${ROUNDS} latency rounds`);
    const waiters = connected.slice(0, WAITERS);
    const parked = await wakeLatency(server, dovecot, waiters);
    await bareIdleLatency(dovecot, connected[connected.length - 1]);
    progress('reconnect storm');
    await reconnectStorm(server, dovecot, waiters, parked, total);
    if (INITIAL_MESSAGES > 0) {
      progress(`initial sync of ${INITIAL_MESSAGES} messages`);
      await initialSync(server, dovecot, total);
    }
  } catch (err) {
    const imapReply = (err as { responseText?: string }).responseText;
    if (imapReply) progress(`the IMAP server answered: ${imapReply}`);
    progress(`Dovecot's log (end):\n${dovecot.logs().slice(-3000)}`);
    throw err;
  } finally {
    await server?.stop();
    await dovecot.close();
    await db.drop();
    await releaseDatabase();
  }

  printTable('Connected mailboxes benchmark', rows);
}

runBenchmark(main);
