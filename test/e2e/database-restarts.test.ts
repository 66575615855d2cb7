import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Client as PgClient } from 'pg';
import { MODERN } from '../support/mcp-2026';
import { PrivateCluster } from '../support/private-cluster';
import { RestClient } from '../support/rest';
import { spawnServer, SpawnedServer } from '../support/spawned-server';
import { startTask } from '../support/tasks';
import { createMailbox, createToken, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** Calls made in all; the faults come while they run. */
const MIN_CALLS = 1000;
/** Successful calls between two faults, so every fault meets a server that had recovered. */
const CALLS_BETWEEN_FAULTS = 120;
/** No call may take longer (nothing hangs during an outage); the SDK's own timeout is 60 s. */
const CALL_TIMEOUT_MS = 10_000;

/** An HTTP error answer of /mcp, as the client's fetch saw it. */
interface HttpRefusal {
  requestId: unknown;
  status: number;
  retryAfter: string | null;
  text: string;
}

/**
 * The client's fetch, keeping the last error answer: the SDK clients turn an HTTP 503 into an
 * exception that carries neither its headers nor its JSON-RPC body.
 */
class RecordingFetch {
  last: HttpRefusal | undefined;

  readonly fetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const res = await fetch(url, init);
    if (res.status >= 400) {
      let requestId: unknown;
      try {
        requestId = typeof init?.body === 'string' ? (JSON.parse(init.body) as { id?: unknown }).id : undefined;
      } catch {
        requestId = undefined;
      }
      const text = await res.clone().text();
      this.last = { requestId, status: res.status, retryAfter: res.headers.get('retry-after'), text };
    }
    return res;
  };
}

type Outcome = { kind: 'ok'; data: any } | { kind: 'unavailable' } | { kind: 'http503' };

/** What every call answered, and what it should not have. */
class Tally {
  calls = 0;
  ok = 0;
  unavailable = 0;
  http503 = 0;
  /** Wrong answers by kind: how many, and one example. */
  readonly wrong = new Map<string, { count: number; example: string }>();

  get wrongCount(): number {
    return [...this.wrong.values()].reduce((sum, w) => sum + w.count, 0);
  }

  /** One line per kind of wrong answer. */
  wrongSummary(): string[] {
    return [...this.wrong].map(([kind, { count, example }]) => `${count}× ${kind} (e.g. ${example.slice(0, 300)})`);
  }

  fail(kind: string, example: string): void {
    const entry = this.wrong.get(kind) ?? { count: 0, example };
    entry.count++;
    this.wrong.set(kind, entry);
  }

  /**
   * Runs one call and sorts its answer: a success, the `unavailable` tool error (or JSON-RPC error
   * whose data says `unavailable`, for task operations), or HTTP 503 with Retry-After and a
   * JSON-RPC body carrying the request's id. Anything else is wrong.
   */
  async run(what: string, recorder: RecordingFetch, call: () => Promise<unknown>): Promise<Outcome | undefined> {
    this.calls++;
    recorder.last = undefined;
    let answer: unknown;
    try {
      answer = await call();
    } catch (err) {
      const refusal = recorder.last as HttpRefusal | undefined;
      if (refusal) return this.refused(what, refusal);
      if (err instanceof McpError && (err.data as { error?: unknown } | undefined)?.error === 'unavailable') {
        this.unavailable++;
        return { kind: 'unavailable' };
      }
      const code = (err as { code?: unknown }).code;
      this.fail(`${what}: error ${String(code)}`, err instanceof Error ? err.message : String(err));
      return undefined;
    }
    const result = answer as CallToolResult;
    if (result.isError) {
      const body = result.structuredContent as { error?: string } | undefined;
      if (body?.error === 'unavailable') {
        this.unavailable++;
        return { kind: 'unavailable' };
      }
      this.fail(`${what}: tool error ${body?.error}`, JSON.stringify(body));
      return undefined;
    }
    this.ok++;
    return { kind: 'ok', data: result.structuredContent ?? answer };
  }

  private refused(what: string, refusal: HttpRefusal): Outcome | undefined {
    let body: { jsonrpc?: unknown; id?: unknown; error?: { code?: unknown } } | undefined;
    try {
      body = JSON.parse(refusal.text) as typeof body;
    } catch {
      body = undefined;
    }
    const problems = [
      refusal.status !== 503 && `HTTP ${refusal.status}`,
      !(Number(refusal.retryAfter) > 0) && 'no Retry-After',
      body?.jsonrpc !== '2.0' && 'no JSON-RPC body',
      typeof body?.error?.code !== 'number' && 'no JSON-RPC error code',
      body?.id !== refusal.requestId && `id ${JSON.stringify(body?.id)} instead of the request's`,
    ].filter(Boolean);
    if (problems.length > 0) {
      this.fail(`${what}: ${problems.join(', ')}`, refusal.text);
      return undefined;
    }
    this.http503++;
    return { kind: 'http503' };
  }
}

/**
 * No internal errors under database faults: agents keep calling while PostgreSQL is
 * restarted (fast), stopped at once (immediate, then crash recovery) and has its sessions
 * terminated. Every call answers a result, the `unavailable` tool error or HTTP 503 with
 * Retry-After and a JSON-RPC body; never -32603 or a 500. What answered success is in the database.
 */
describe('database restarts under load', () => {
  let cluster: PrivateCluster;
  let server: SpawnedServer;
  let mailboxId: string;
  let messageId: string;
  let agentSecret: string;
  const adminSecret = randomSecret();

  before(async () => {
    cluster = await PrivateCluster.create();
    // A process of its own: the agents' clients and the server do not share one event loop.
    server = await spawnServer({
      DATABASE_URL: cluster.url,
      ALCARTA_BOOTSTRAP_TOKEN: adminSecret,
      ALCARTA_LOG_LEVEL: 'silent',
      ALCARTA_DB_POOL_SIZE: '5',
      ALCARTA_RATE_LIMIT_PER_SECOND: '0',
      // Task-augmented waits pile up while PostgreSQL is down; the cap is not what this test is about.
      ALCARTA_MAX_ACTIVE_TASKS_PER_TOKEN: '10000',
    });
    const admin = new RestClient(server.url, adminSecret);
    mailboxId = await createMailbox(admin);
    messageId = await ingest(admin, mailboxId, { subject: 'before the faults' });
    agentSecret = (
      await createToken(admin, { scopes: ['mail:read', 'mail:send', 'approvals:read'], mailboxes: [mailboxId] })
    ).secret;
  });

  after(async () => {
    await server?.stop();
    await cluster?.remove();
  });

  it('answers every call with a result, unavailable or 503 across restarts, and loses nothing', async (t) => {
    const tally = new Tally();
    /** Requests whose creation answered success, and those whose cancellation did. */
    const created = new Set<string>();
    const cancelled = new Set<string>();
    let stop = false;

    const connectLegacy = async () => {
      const recorder = new RecordingFetch();
      const client = new Client({ name: 'restart-tests', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL('/mcp', server.url), {
          requestInit: { headers: { authorization: `Bearer ${agentSecret}` } },
          fetch: recorder.fetch,
        }),
      );
      return { client, recorder };
    };
    const connectModern = async () => {
      const recorder = new RecordingFetch();
      const client = new ModernClient(
        { name: 'restart-tests-2026', version: '1.0.0' },
        { versionNegotiation: { mode: { pin: MODERN } } },
      );
      await client.connect(
        new ModernTransport(new URL('/mcp', server.url), {
          requestInit: { headers: { authorization: `Bearer ${agentSecret}` } },
          fetch: recorder.fetch,
        }),
      );
      return { client, recorder };
    };

    /** The calls an agent makes, in turn; `uncancelled` holds requests this worker made and may cancel once. */
    const toolCalls = (uncancelled: string[]): Array<[string, () => Record<string, unknown>]> => [
      ['send_email', () => ({ mailbox_id: mailboxId, to: ['someone@example.org'], subject: 'Hi', text: 'Hello' })],
      ['request_approval', () => ({ mailbox_id: mailboxId, title: 'May I?' })],
      ['get_request', () => ({ request_id: [...created][created.size - 1] })],
      ['list_messages', () => ({ mailbox_id: mailboxId, limit: 5 })],
      ['get_message', () => ({ message_id: messageId })],
      ['email_await', () => ({ event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: 0 })],
      ['cancel_request', () => ({ request_id: uncancelled.shift() })],
    ];

    const record = (name: string, args: Record<string, unknown>, outcome: Outcome | undefined, mine: string[]) => {
      if (outcome?.kind !== 'ok') return;
      if (name === 'send_email' || name === 'request_approval') {
        created.add(outcome.data.request_id);
        mine.push(outcome.data.request_id);
      }
      if (name === 'cancel_request') cancelled.add(args.request_id as string);
    };

    const legacyWorker = async (index: number) => {
      const { client, recorder } = await connectLegacy();
      const mine: string[] = [];
      const taskIds: string[] = [];
      try {
        for (let turn = index; !stop; turn++) {
          const calls = toolCalls(mine);
          const step = turn % (calls.length + 2);
          if (step === calls.length) {
            // A task-augmented wait (2025-11-25 Tasks): created in the database, done at once.
            const outcome = await tally.run('tools/call as a task', recorder, () =>
              startTask(client, 'email_await', {
                event: { type: 'message_received', mailbox_id: mailboxId },
                timeout_seconds: 0,
              }),
            );
            if (outcome?.kind === 'ok') taskIds.push(outcome.data.taskId);
            continue;
          }
          if (step === calls.length + 1) {
            if (taskIds.length > 0) {
              await tally.run('tasks/get', recorder, () =>
                client.experimental.tasks.getTask(taskIds[taskIds.length - 1]),
              );
            }
            continue;
          }
          const [name, argsOf] = calls[step];
          if ((name === 'get_request' && created.size === 0) || (name === 'cancel_request' && mine.length === 0))
            continue;
          const args = argsOf();
          const outcome = await tally.run(`${name} (2025-11-25)`, recorder, () =>
            client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS }),
          );
          record(name, args, outcome, mine);
        }
      } finally {
        await client.close();
      }
    };

    const modernWorker = async () => {
      const { client, recorder } = await connectModern();
      const mine: string[] = [];
      try {
        for (let turn = 0; !stop; turn++) {
          const calls = toolCalls(mine);
          const [name, argsOf] = calls[turn % calls.length];
          if ((name === 'get_request' && created.size === 0) || (name === 'cancel_request' && mine.length === 0))
            continue;
          const args = argsOf();
          const outcome = await tally.run(`${name} (2026-07-28)`, recorder, () =>
            client.callTool({ name, arguments: args }, { timeout: CALL_TIMEOUT_MS }),
          );
          record(name, args, outcome, mine);
        }
      } finally {
        await client.close();
      }
    };

    const workers = [...[0, 1, 2, 3].map((i) => legacyWorker(i)), modernWorker()];
    const settled = Promise.allSettled(workers);

    const faults: Array<[string, () => Promise<unknown>]> = [
      ['fast restart', async () => (await cluster.stop(), cluster.start())],
      ['sessions terminated', () => cluster.terminateSessions('alcarta')],
      ['immediate stop and start (crash recovery)', async () => (await cluster.stopImmediately(), cluster.start())],
      ['fast restart', async () => (await cluster.stop(), cluster.start())],
    ];
    try {
      for (const [what, fault] of [...faults, ['the last calls', () => Promise.resolve()] as const]) {
        const mark = tally.ok;
        await waitFor(
          `${CALLS_BETWEEN_FAULTS} successful calls before ${what}`,
          () => tally.ok >= mark + CALLS_BETWEEN_FAULTS || tally.wrongCount > 200,
          { timeoutMs: 30_000, intervalMs: 20 },
        );
        await fault();
      }
      await waitFor(`${MIN_CALLS} calls`, () => tally.calls >= MIN_CALLS || tally.wrongCount > 200, {
        timeoutMs: 30_000,
        intervalMs: 20,
      });
    } finally {
      stop = true;
      const results = await settled;
      for (const r of results) if (r.status === 'rejected') tally.fail('a worker failed', String(r.reason));
    }

    t.diagnostic(
      `${tally.calls} calls: ${tally.ok} ok, ${tally.unavailable} unavailable, ${tally.http503} HTTP 503, ${tally.wrongCount} wrong`,
    );
    assert.deepEqual(tally.wrongSummary(), [], `${tally.wrongCount} wrong answers of ${tally.calls} calls`);
    assert.ok(tally.calls >= MIN_CALLS, `${tally.calls} calls`);
    assert.ok(tally.unavailable + tally.http503 > 0, 'the faults were felt by some calls');

    const db = new PgClient({ connectionString: cluster.url });
    await db.connect();
    try {
      const rows = await db.query<{ id: string; state: string }>(
        'SELECT id, state FROM approval_requests WHERE id = ANY($1)',
        [[...created]],
      );
      const stored = new Map(rows.rows.map((r) => [r.id, r.state]));
      const lost = [...created].filter((id) => !stored.has(id));
      assert.deepEqual(lost, [], 'every request whose creation answered success is stored');
      const notCancelled = [...cancelled].filter((id) => stored.get(id) !== 'cancelled');
      assert.deepEqual(notCancelled, [], 'every cancellation that answered success is stored');
    } finally {
      await db.end();
    }
  });
});
