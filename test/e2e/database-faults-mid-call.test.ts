import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Client as PgClient } from 'pg';
import { SERVER_ERROR } from '#app/kernel/json-rpc.js';
import { callOk, connectMcp, rawMcp } from '../support/mcp';
import { envelope, revision2026Headers } from '../support/mcp-2026';
import { startTask } from '../support/tasks';
import { raw2026, startInboxTask } from '../support/tasks-2026';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const DECLARES_EVENTS = { extensions: { 'io.modelcontextprotocol/events': {} } };

/**
 * No internal errors under database faults, one path at a time: the connection of a
 * call is terminated by PostgreSQL (pg_terminate_backend, as in a restart or failover) while the
 * call is in the middle of its statement, after authentication. The test holds a lock on the table
 * the statement needs, waits until the server's session is blocked on it, and terminates that
 * session. Tool calls answer the `unavailable` tool error; protocol requests (task creation,
 * tasks/get, events/poll) the JSON-RPC error -32000 with Alcarta's `unavailable` body; a request
 * that has not started its response yet HTTP 503 with Retry-After and its JSON-RPC id. Never -32603.
 */
describe('database connection lost mid-call', () => {
  let server: TestServer;
  let agent: Client;
  let secret: string;
  let mailboxId: string;
  let monitor: PgClient;

  before(async () => {
    server = await startTestServer();
    mailboxId = await createMailbox(server.admin);
    secret = (
      await createToken(server.admin, { scopes: ['mail:read', 'mail:send', 'approvals:read'], mailboxes: [mailboxId] })
    ).secret;
    agent = await connectMcp(server.url, secret);
    // A session of its own: pg_stat_activity is read once per transaction, and the locking one stays open.
    monitor = new PgClient({ connectionString: server.db.url });
    await monitor.connect();
  });

  after(async () => {
    await agent?.close();
    await monitor?.end();
    await server?.close();
  });

  /**
   * Runs `call` while `table` is locked, terminates the server's session once it waits on the lock
   * with a statement like `statement` (a LIKE pattern), then lets go of the lock; returns what the
   * call answered.
   */
  async function terminatedDuring<T>(table: string, statement: string, call: () => Promise<T>): Promise<T> {
    await server.db.query('BEGIN');
    let answer: Promise<T> | undefined;
    try {
      await server.db.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
      answer = call();
      answer.catch(() => undefined);
      const pid = await waitFor(`the server to wait on ${table} with ${statement}`, async () => {
        const { rows } = await monitor.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'alcarta'
              AND wait_event_type = 'Lock' AND query LIKE $1`,
          [statement],
        );
        return rows[0]?.pid;
      });
      await monitor.query('SELECT pg_terminate_backend($1)', [pid]);
    } finally {
      await server.db.query('ROLLBACK');
    }
    return answer;
  }

  /** A JSON-RPC error thrown by the SDK client: -32000 with the `unavailable` body, not -32603. */
  const assertUnavailableRpcError = (err: unknown, what: string) => {
    assert.ok(err instanceof McpError, `${what}: ${String(err)}`);
    assert.equal(err.code, SERVER_ERROR, `${what}: ${err.message}`);
    assert.equal((err.data as { error?: string })?.error, 'unavailable', `${what}: ${JSON.stringify(err.data)}`);
    return true;
  };

  it('a tool call answers the unavailable tool error (2025-11-25)', async () => {
    const result = (await terminatedDuring('approval_requests', 'INSERT INTO "approval_requests"%', () =>
      agent.callTool({ name: 'request_approval', arguments: { mailbox_id: mailboxId, title: 'May I?' } }),
    )) as CallToolResult;
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.equal((result.structuredContent as { error?: string }).error, 'unavailable');
    const { rows } = await monitor.query('SELECT count(*)::int AS n FROM approval_requests');
    assert.equal(rows[0].n, 0, 'nothing was stored');
    // The terminated session is not handed to the next call, which is served at once.
    const next = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'And now?' });
    assert.equal(next.state, 'pending');
  });

  it('a task-augmented call answers -32000 unavailable, and no task is left (2025-11-25)', async () => {
    await assert.rejects(
      terminatedDuring('tasks', 'SELECT COUNT(1)%FROM "tasks"%', () =>
        startTask(agent, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 60 }),
      ),
      (err) => assertUnavailableRpcError(err, 'tools/call with params.task'),
    );
    const { rows } = await monitor.query('SELECT count(*)::int AS n FROM tasks');
    assert.equal(rows[0].n, 0, 'no task was stored');
  });

  it('tasks/get answers -32000 unavailable (2025-11-25 and 2026-07-28)', async () => {
    const task = await startTask(agent, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 60 });
    await assert.rejects(
      terminatedDuring('tasks', 'SELECT %FROM "tasks" "TaskEntity"%', () =>
        agent.experimental.tasks.getTask(task.taskId),
      ),
      (err) => assertUnavailableRpcError(err, 'tasks/get at 2025-11-25'),
    );

    const task2026 = await startInboxTask(server.url, secret, mailboxId);
    const res = await terminatedDuring('tasks', 'SELECT %FROM "tasks" "TaskEntity"%', () =>
      raw2026(server.url, secret, 'tasks/get', { taskId: task2026.taskId }),
    );
    assert.equal(res.json?.error?.code, SERVER_ERROR, res.text);
    assert.equal(res.json.error.data?.error, 'unavailable', res.text);

    // The server is fine afterwards: the same requests answer.
    assert.equal((await agent.experimental.tasks.getTask(task.taskId)).status, 'working');
    assert.equal(
      (await raw2026(server.url, secret, 'tasks/get', { taskId: task2026.taskId })).json.result?.status,
      'working',
    );
    await agent.experimental.tasks.cancelTask(task.taskId);
    await raw2026(server.url, secret, 'tasks/cancel', { taskId: task2026.taskId });
  });

  it('events/poll answers -32000 unavailable (2026-07-28)', async () => {
    const res = await terminatedDuring('events', '%pg_snapshot_xmin%FROM events%', () =>
      rawMcp(
        server.url,
        secret,
        {
          jsonrpc: '2.0',
          id: 'poll-1',
          method: 'events/poll',
          params: { name: 'approval.decided', cursor: null, _meta: envelope(DECLARES_EVENTS) },
        },
        revision2026Headers('events/poll'),
      ),
    );
    assert.equal(res.json?.id, 'poll-1', res.text);
    assert.equal(res.json.error?.code, SERVER_ERROR, res.text);
    assert.equal(res.json.error.data?.error, 'unavailable', res.text);
  });

  it('a subscriptions/listen that has not started its stream answers HTTP 503 with its id (2026-07-28)', async () => {
    const task2026 = await startInboxTask(server.url, secret, mailboxId);
    const res = await terminatedDuring('tasks', 'SELECT %FROM "tasks" "TaskEntity"%', () =>
      raw2026(server.url, secret, 'subscriptions/listen', { notifications: { taskIds: [task2026.taskId] } }),
    );
    assert.equal(res.status, 503, res.text);
    assert.ok(Number(res.headers.get('retry-after')) > 0, 'Retry-After');
    assert.equal(typeof res.json?.id, 'number', res.text);
    assert.equal(res.json.error?.code, SERVER_ERROR, res.text);
    assert.equal(res.json.error.data?.error, 'unavailable', res.text);
    await raw2026(server.url, secret, 'tasks/cancel', { taskId: task2026.taskId });
  });
});
