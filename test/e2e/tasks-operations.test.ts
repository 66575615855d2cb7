import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import type { Task } from '@modelcontextprotocol/sdk/types.js';
import { callError, callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { assertTaskShape, rejectsWith, startTask, taskContent, taskResult, taskToolError } from '../support/tasks';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/**
 * docs/agents.md "Tasks" task operations with the default settings: tasks/get, tasks/list (pages of
 * 20, opaque cursor), tasks/cancel (the wait stops; terminal → -32602), the binding of every task
 * to the token that created it (any other token: -32602, and tasks/list shows only the caller's),
 * the ttl rules, and task-augmented calls with wrong arguments, which give a `failed` task whose
 * result is the tool error a plain call returns.
 */
describe('MCP Tasks: operations', () => {
  let server: TestServer;
  let agent: Client;
  let mailboxId: string;
  let tokenId: string;
  const clients: Client[] = [];

  /** An agent with its own token (same scopes and mailbox), so its tasks/list is its own. */
  const newAgent = async () => {
    const token = await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxId] });
    const client = await connectMcp(server.url, token.secret);
    clients.push(client);
    return { client, tokenId: token.id };
  };
  const inboxTask = (client = agent, ttl?: number, timeoutSeconds = 300) =>
    startTask(client, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: timeoutSeconds }, ttl);
  const getTask = (taskId: string, client = agent) => client.experimental.tasks.getTask(taskId);
  const taskRow = async (taskId: string) =>
    (
      await server.db.query<{ status: string; wait_status: string | null; result: unknown }>(
        'SELECT t.status, w.status AS wait_status, t.result FROM tasks t LEFT JOIN waits w ON w.id = t.wait_id WHERE t.id = $1',
        [taskId],
      )
    )[0];

  before(async () => {
    server = await startTestServer();
    mailboxId = await createMailbox(server.admin);
    ({ client: agent, tokenId } = await newAgent());
  });

  after(async () => {
    for (const client of clients) await client.close();
    await server?.close();
  });

  it('tasks/get returns the Task with every field; the default pollInterval is 2 s', async () => {
    const created = await inboxTask();
    const task = await getTask(created.taskId);
    assertTaskShape(task, 'working');
    const { _meta: _ignored, ...fields } = task as Task & { _meta?: unknown };
    assert.deepEqual(fields, created);
    assert.equal(task.pollInterval, 2000);
    assert.deepEqual(await taskRow(created.taskId), { status: 'working', wait_status: 'pending', result: null });
  });

  it('ttl: the requested one is honoured, up to 24 h; the default is the wait timeout plus one hour', async () => {
    assert.equal((await inboxTask(agent, 90_000)).ttl, 90_000);
    assert.equal((await inboxTask(agent, DAY_MS)).ttl, DAY_MS);
    assert.equal((await inboxTask(agent, DAY_MS + 1)).ttl, DAY_MS, 'capped at ALCARTA_TASK_MAX_TTL_SECONDS');
    assert.equal((await inboxTask(agent, 30 * DAY_MS)).ttl, DAY_MS);
    assert.equal((await inboxTask(agent, undefined, 300)).ttl, 300_000 + HOUR_MS);
    assert.equal((await inboxTask(agent, undefined, 0)).ttl, HOUR_MS);
    const { request_id: requestId } = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'ttl' });
    const approval = await startTask(agent, 'monitor_approval', { request_id: requestId, timeout_seconds: 7200 });
    assert.equal(approval.ttl, 7200_000 + HOUR_MS);
  });

  it('tasks/list pages through more than 20 tasks with an opaque cursor, each task exactly once', async () => {
    const { client } = await newAgent();
    const created: string[] = [];
    for (let i = 0; i < 45; i++) created.push((await inboxTask(client)).taskId);

    const seen: string[] = [];
    const pages: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.experimental.tasks.listTasks(cursor);
      pages.push(page.tasks.length);
      for (const task of page.tasks) {
        assertTaskShape(task, 'working');
        seen.push(task.taskId);
      }
      cursor = page.nextCursor;
      if (cursor !== undefined) {
        assert.equal(typeof cursor, 'string');
        for (const id of created) assert.ok(!cursor.includes(id), 'the cursor shows no task id');
      }
    } while (cursor !== undefined);
    assert.deepEqual(pages, [20, 20, 5]);
    assert.equal(new Set(seen).size, seen.length, 'no task twice');
    assert.deepEqual([...seen].sort(), [...created].sort(), 'every task once');
  });

  it('tasks/list with a cursor it did not issue is -32602', async () => {
    for (const cursor of ['garbage', 'tc1.', 'tc1.bm90LWpzb24', `tc1.${Buffer.from('[1,2]').toString('base64url')}`]) {
      await rejectsWith(agent.experimental.tasks.listTasks(cursor), ErrorCode.InvalidParams, cursor);
    }
  });

  it('tasks/cancel: cancelled before it answers, the wait stops, and a later match changes nothing', async () => {
    const task = await inboxTask();
    const cancelled = await agent.experimental.tasks.cancelTask(task.taskId);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(cancelled.taskId, task.taskId);
    assert.equal(cancelled.createdAt, task.createdAt);
    assert.equal((await taskRow(task.taskId)).status, 'cancelled', 'stored before the response');
    assert.equal((await taskRow(task.taskId)).wait_status, 'resolved', 'its wait is stopped');
    assert.equal((await getTask(task.taskId)).status, 'cancelled');

    // A task started after the cancel sees the same mail: once it completes, the mail was processed.
    const control = await inboxTask();
    const messageId = await ingest(server.admin, mailboxId, { subject: 'too late for the cancelled task' });
    assert.deepEqual(
      taskContent(await taskResult(agent, control.taskId), control.taskId).events[0].message_id,
      messageId,
    );
    assert.equal((await getTask(task.taskId)).status, 'cancelled');
    assert.equal((await taskRow(task.taskId)).result, null);

    await rejectsWith(taskResult(agent, task.taskId), ErrorCode.InvalidParams, 'tasks/result of a cancelled task');
    await rejectsWith(agent.experimental.tasks.cancelTask(task.taskId), ErrorCode.InvalidParams, 'cancel twice');
    await rejectsWith(agent.experimental.tasks.cancelTask(control.taskId), ErrorCode.InvalidParams, 'completed');
    assert.equal((await getTask(control.taskId)).status, 'completed', 'a refused cancel changes nothing');
  });

  it('tasks/cancel answers a tasks/result blocked on the task with an error', async () => {
    const task = await inboxTask();
    const blocked = rejectsWith(taskResult(agent, task.taskId), ErrorCode.InvalidParams, 'the blocked tasks/result');
    await waitFor('tasks/result to park', async () => (await activeWaits(server.url, undefined, 'poll')) === 1, {
      timeoutMs: 30_000,
    });
    await agent.experimental.tasks.cancelTask(task.taskId);
    await blocked;
  });

  it('every task operation of another token (same scopes and mailbox) is -32602; tasks/list shows none', async () => {
    const task = await inboxTask();
    const { client: other } = await newAgent();
    const notFound = async (promise: Promise<unknown>, what: string) => {
      const data = await rejectsWith(promise, ErrorCode.InvalidParams, what);
      assert.equal(data?.error, 'not_found', what);
    };
    await notFound(getTask(task.taskId, other), 'tasks/get');
    await notFound(taskResult(other, task.taskId), 'tasks/result');
    await notFound(other.experimental.tasks.cancelTask(task.taskId), 'tasks/cancel');
    assert.deepEqual((await other.experimental.tasks.listTasks()).tasks, []);
    assert.equal((await getTask(task.taskId)).status, 'working', 'the owner still has it, working');

    // Its own task is visible to it, and only that one.
    const own = await inboxTask(other);
    assert.deepEqual(
      (await other.experimental.tasks.listTasks()).tasks.map((t) => t.taskId),
      [own.taskId],
    );
    const mine = [];
    let cursor: string | undefined;
    do {
      const page = await agent.experimental.tasks.listTasks(cursor);
      mine.push(...page.tasks.map((t) => t.taskId));
      cursor = page.nextCursor;
    } while (cursor);
    assert.ok(mine.includes(task.taskId) && !mine.includes(own.taskId));
    const owners = await server.db.query('SELECT DISTINCT token_id FROM tasks WHERE id = ANY($1)', [mine]);
    assert.deepEqual(owners, [{ token_id: tokenId }]);
  });

  it('an unknown taskId is -32602 for every operation', async () => {
    for (const id of ['task_doesnotexist000000000', 'nonsense']) {
      await rejectsWith(getTask(id), ErrorCode.InvalidParams, `get ${id}`);
      await rejectsWith(taskResult(agent, id), ErrorCode.InvalidParams, `result ${id}`);
      await rejectsWith(agent.experimental.tasks.cancelTask(id), ErrorCode.InvalidParams, `cancel ${id}`);
    }
  });

  describe('task-augmented calls with wrong arguments give a failed task carrying the tool error', () => {
    const failedWith = async (name: string, args: Record<string, unknown>) => {
      const task = await startTask(agent, name, args);
      assert.equal(task.status, 'failed');
      const got = await getTask(task.taskId);
      assertTaskShape(got, 'failed');
      assert.equal(typeof got.statusMessage, 'string');
      return taskToolError(await taskResult(agent, task.taskId), task.taskId);
    };

    for (const delivery of ['websocket', 'any']) {
      it(`delivery "${delivery}" → invalid_request / delivery_not_supported_with_task`, async () => {
        const before = Number((await server.db.query<{ n: number }>('SELECT count(*)::int AS n FROM waits'))[0].n);
        const error = await failedWith('monitor_inbox', { mailbox_id: mailboxId, delivery });
        assert.equal(error.error, 'invalid_request');
        assert.equal(error.reason, 'delivery_not_supported_with_task');
        const afterCount = (await server.db.query<{ n: number }>('SELECT count(*)::int AS n FROM waits'))[0].n;
        assert.equal(afterCount, before, 'no wait was stored');
      });
    }

    const sameAsPlain: Array<[string, string, () => Record<string, unknown>]> = [
      ['timeout_exceeds_limit', 'monitor_inbox', () => ({ mailbox_id: mailboxId, timeout_seconds: 301 })],
      [
        'a request wait over its limit',
        'email_await',
        () => ({ event: { type: 'request_state_changed', request_ids: ['chk_x'] }, timeout_seconds: 14401 }),
      ],
      ['an unknown request', 'monitor_approval', () => ({ request_id: 'chk_doesnotexist', timeout_seconds: 10 })],
      ['an invisible mailbox', 'monitor_inbox', () => ({ mailbox_id: 'mbx_doesnotexist' })],
      ['a malformed cursor', 'monitor_inbox', () => ({ since_cursor: 'not-a-cursor' })],
      ['a negative timeout', 'email_await', () => ({ event: { type: 'message_received' }, timeout_seconds: -1 })],
      ['an unknown argument', 'monitor_inbox', () => ({ mailbox: mailboxId })],
    ];
    for (const [what, name, args] of sameAsPlain) {
      it(`${what}: the same error as the plain call`, async () => {
        const plain = await callError(agent, name, args());
        assert.deepEqual(await failedWith(name, args()), plain);
      });
    }

    it('timeout_exceeds_limit carries max_timeout_seconds', async () => {
      const error = await failedWith('monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 301 });
      assert.equal(error.error, 'invalid_request');
      assert.equal(error.reason, 'timeout_exceeds_limit');
      assert.equal(error.max_timeout_seconds, 300);
    });
  });
});
