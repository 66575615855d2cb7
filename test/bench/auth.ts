/**
 * `npm run bench:auth`: what validating a JWT access token costs an MCP `tools/call`.
 *
 *   static token   CLIENTS official SDK clients call `list_messages` in a loop with an `alc_` token
 *   JWT            the same with an RS256 JWT of a loopback issuer whose key the server holds already
 *   relative cost  1 − JWT rate / static rate, medians of RUNS alternating runs   [≤ 10 %]
 *   server CPU     the server process's CPU time per tools/call on each side (less disturbed by
 *                  other processes on a busy machine than throughput is)
 *   verification   CPU time of AccessTokenVerifier.verify alone, key cached, in the bench process
 *
 * Each run: WARMUP_SECONDS of calls that are not counted, then SECONDS counted. Both credentials
 * reach the same one mailbox (the token directly, the JWT through a grant to its subject) with the
 * same scope, so the two sides differ only in how the caller is authenticated. The server is a real
 * `node dist/main.js` process on DATABASE_URL's server (a fresh database on it), else on a throwaway
 * embedded PostgreSQL. BENCH_CPU_PROF=<dir> writes the server's CPU profile there (cpu-profile-preload.ts).
 */
import { readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { SignJWT } from 'jose';
import { AccessTokenVerifier } from '#app/auth/oauth/access-token-verifier.js';
import { createTestDatabase } from '../support/database';
import { FakeAuthorizationServer, signingKey } from '../support/fake-authorization-server';
import { connectMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { spawnServer } from '../support/spawned-server';
import { createMailbox, createToken, ingest, randomSecret } from '../support/test-server';
import { BenchRow, databaseServer, printTable, runBenchmark } from './report';

const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const FIRST_WARMUP_SECONDS = 5;
const MESSAGES = 5;
const VERIFICATIONS = 2000;
const AUDIENCE = 'https://alcarta.bench.test/mcp';
const SUBJECT = 'bench-agent';
const TARGET_PERCENT = 10;
/** USER_HZ: the unit of /proc/<pid>/stat's CPU times on every Linux architecture Node runs on. */
const CLOCK_TICKS_PER_SECOND = 100;

const adminToken = randomSecret();

/** Calls `list_messages` on every client in a loop until `until`; returns the number of calls answered. */
async function callLoop(clients: Client[], mailboxId: string, until: number): Promise<number> {
  let calls = 0;
  await Promise.all(
    clients.map(async (client) => {
      while (performance.now() < until) {
        const result = (await client.callTool({
          name: 'list_messages',
          arguments: { mailbox_id: mailboxId, limit: MESSAGES },
        })) as CallToolResult;
        if (result.isError) throw new Error(`list_messages failed: ${JSON.stringify(result.structuredContent)}`);
        calls++;
      }
    }),
  );
  return calls;
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux; undefined elsewhere). */
async function cpuSeconds(pid: number): Promise<number | undefined> {
  try {
    const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
    // Fields 14 and 15 of stat(5), counted after the command name: utime and stime in clock ticks.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

interface RunResult {
  /** tools/call answered per second. */
  rate: number;
  /** Server CPU time per tools/call in microseconds: what other processes on the machine disturb least. */
  cpuMicros: number | undefined;
}

/** One run: a warm-up, then the counted calls. */
async function measure(clients: Client[], mailboxId: string, serverPid: number): Promise<RunResult> {
  await callLoop(clients, mailboxId, performance.now() + WARMUP_SECONDS * 1000);
  const cpuBefore = await cpuSeconds(serverPid);
  const started = performance.now();
  const calls = await callLoop(clients, mailboxId, started + SECONDS * 1000);
  const seconds = (performance.now() - started) / 1000;
  const cpuAfter = await cpuSeconds(serverPid);
  const cpuMicros =
    cpuBefore === undefined || cpuAfter === undefined ? undefined : ((cpuAfter - cpuBefore) / calls) * 1e6;
  return { rate: calls / seconds, cpuMicros };
}

function describe(run: RunResult): string {
  return `${run.rate.toFixed(0)}/s` + (run.cpuMicros === undefined ? '' : ` (${run.cpuMicros.toFixed(0)} µs CPU/call)`);
}

function signed(value: number): string {
  return `${value >= 0 ? '+' : '−'}${Math.abs(value).toFixed(1)}`;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** CPU microseconds one verification of a JWT takes once the key is cached (signature, claims). */
async function verificationCost(issuer: string, jwt: string): Promise<number> {
  const verifier = new AccessTokenVerifier({
    issuer,
    jwksUrl: undefined,
    audiences: [AUDIENCE],
    failureBackoffMs: 30_000,
    maxTokenLifetimeSeconds: 86_400,
  });
  for (let i = 0; i < 100; i++) {
    if (!(await verifier.verify(jwt))) throw new Error('the bench JWT does not verify');
  }
  const before = process.cpuUsage();
  for (let i = 0; i < VERIFICATIONS; i++) await verifier.verify(jwt);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / VERIFICATIONS;
}

async function connectClients(url: string, credential: string): Promise<Client[]> {
  return Promise.all(Array.from({ length: CLIENTS }, () => connectMcp(url, credential)));
}

async function main(): Promise<void> {
  const releaseDatabase = await databaseServer();
  const issuer = new FakeAuthorizationServer();
  const key = await signingKey('bench-key');
  issuer.keys = [key];
  await issuer.start();
  const db = await createTestDatabase();
  const profileDir = process.env.BENCH_CPU_PROF;
  const server = await spawnServer({
    DATABASE_URL: db.url,
    ALCARTA_BOOTSTRAP_TOKEN: adminToken,
    ALCARTA_LOG_LEVEL: 'warn',
    ALCARTA_DB_POOL_SIZE: '10',
    ALCARTA_RATE_LIMIT_PER_SECOND: '0',
    ALCARTA_OAUTH_ISSUER: issuer.issuer,
    ALCARTA_OAUTH_AUDIENCE: AUDIENCE,
    ...(profileDir ? { NODE_OPTIONS: `--require ${join(__dirname, 'cpu-profile-preload.js')}` } : {}),
  });
  const clients: Client[] = [];
  try {
    const admin = new RestClient(server.url, adminToken);
    const mailboxId = await createMailbox(admin, 'bench-auth@example.com');
    for (let i = 0; i < MESSAGES; i++) await ingest(admin, mailboxId, { subject: `message ${i}` });
    const staticToken = await createToken(admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const grant = await admin.post('/v1/grants', { principal: `sub:${SUBJECT}`, mailboxes: [mailboxId] });
    if (grant.status !== 201) throw new Error(`grant creation failed: ${grant.status} ${JSON.stringify(grant.body)}`);
    const jwt = await new SignJWT({ scope: 'mail:read', client_id: 'bench-client' })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
      .setIssuer(issuer.issuer)
      .setAudience(AUDIENCE)
      .setSubject(SUBJECT)
      .setIssuedAt()
      .setExpirationTime('2h')
      .sign(key.privateKey);

    const staticClients = await connectClients(server.url, staticToken.secret);
    clients.push(...staticClients);
    const jwtClients = await connectClients(server.url, jwt);
    clients.push(...jwtClients);
    // The JWKS is fetched by the first JWT; from here on the key is cached (the figure asked for).
    const jwksFetches = issuer.jwksRequests;

    const staticRuns: RunResult[] = [];
    const jwtRuns: RunResult[] = [];
    // A freshly started server is still compiling its hot paths: the first run would be slow for
    // whichever side went first (a third slower here), so both sides warm up once beforehand.
    for (const side of [staticClients, jwtClients]) {
      await callLoop(side, mailboxId, performance.now() + FIRST_WARMUP_SECONDS * 1000);
    }
    // Alternating runs, the first side swapped every run, so that a slow phase of the machine or
    // whatever one side leaves behind (garbage, cold caches) weighs on both alike.
    for (let run = 0; run < RUNS; run++) {
      if (run % 2 === 0) {
        staticRuns.push(await measure(staticClients, mailboxId, server.pid));
        jwtRuns.push(await measure(jwtClients, mailboxId, server.pid));
      } else {
        jwtRuns.push(await measure(jwtClients, mailboxId, server.pid));
        staticRuns.push(await measure(staticClients, mailboxId, server.pid));
      }
      process.stderr.write(
        `run ${run + 1}/${RUNS}: static ${describe(staticRuns.at(-1)!)}, JWT ${describe(jwtRuns.at(-1)!)}\n`,
      );
    }
    if (issuer.jwksRequests !== jwksFetches) throw new Error('the JWKS was fetched again during the measurement');

    const staticRate = median(staticRuns.map((r) => r.rate));
    const jwtRate = median(jwtRuns.map((r) => r.rate));
    const costPercent = (1 - jwtRate / staticRate) * 100;
    const setup = `${CLIENTS} SDK clients, list_messages (${MESSAGES} messages), ${WARMUP_SECONDS} s warm-up + ${SECONDS} s, median of ${RUNS}`;
    const rates = (runs: RunResult[]) => runs.map((r) => r.rate.toFixed(0)).join(', ');
    const rows: BenchRow[] = [
      ['tools/call, static alc_ token', setup, `${staticRate.toFixed(0)} calls/s (runs: ${rates(staticRuns)})`, '—'],
      ['tools/call, cached-key RS256 JWT', setup, `${jwtRate.toFixed(0)} calls/s (runs: ${rates(jwtRuns)})`, '—'],
      [
        'relative cost of the JWT (throughput)',
        '1 − JWT/static (medians)',
        `${costPercent.toFixed(1)} %`,
        costPercent <= TARGET_PERCENT ? `met (≤ ${TARGET_PERCENT} %)` : `MISSED (≤ ${TARGET_PERCENT} %)`,
      ],
    ];
    // The same two figures run by run: each JWT run against the static run next to it, which
    // cancels the machine's slow drifts that the medians of each side keep.
    const pairedRate = median(jwtRuns.map((r, i) => 1 - r.rate / staticRuns[i].rate)) * 100;
    rows.push(['the same, run by run', 'median of 1 − JWT/static per run', `${signed(pairedRate)} %`, '—']);
    if (staticRuns.every((r) => r.cpuMicros !== undefined)) {
      const staticCpu = median(staticRuns.map((r) => r.cpuMicros!));
      const jwtCpu = median(jwtRuns.map((r) => r.cpuMicros!));
      const pairedCpu = median(jwtRuns.map((r, i) => r.cpuMicros! / staticRuns[i].cpuMicros! - 1)) * 100;
      rows.push([
        'server CPU per tools/call',
        'user + system time of the server process / calls (medians; run by run)',
        `static ${staticCpu.toFixed(0)} µs, JWT ${jwtCpu.toFixed(0)} µs (${signed((jwtCpu / staticCpu - 1) * 100)} %; run by run ${signed(pairedCpu)} %)`,
        '—',
      ]);
    }
    const verifyMicros = await verificationCost(issuer.issuer, jwt);
    rows.push([
      'JWT verification alone',
      `AccessTokenVerifier.verify, key cached, ${VERIFICATIONS} tokens in the bench process`,
      `${verifyMicros.toFixed(0)} µs CPU per token`,
      '—',
    ]);
    printTable(`Auth benchmark (${cpus().length} CPUs, ${cpus()[0]?.model ?? 'unknown CPU'})`, rows);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await server.stop();
    await db.drop();
    await issuer.stop();
    await releaseDatabase();
  }
}

runBenchmark(main);
