import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client as Client2026 } from '@modelcontextprotocol/client';
import type { TaskEnabledSession, TaskView } from '@modelcontextprotocol/ext-tasks/client';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk, connectMcp } from '../support/mcp';
import { callOk2026, connectMcp2026 } from '../support/mcp-2026';
import { activeWaits } from '../support/metrics';
import { Replica, ReplicaSet } from '../support/replicas';
import { startTask } from '../support/tasks';
import { connectTaskSession, raw2026, startInboxTask, TASKS_EXTENSION } from '../support/tasks-2026';
import { createMailbox, createToken, ingest, randomSecret, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const INVALID_PARAMS = -32602;
const HEADER_MISMATCH = -32020;
const MISSING_CLIENT_CAPABILITY = -32021;

/** The fields of a Task of the Tasks extension, and nothing of the 2025-11-25 names. */
function assertExtensionTask(task: Record<string, any>, status: string): void {
  assert.equal(task.status, status);
  assert.match(task.taskId, /^task_/);
  assert.ok(Date.parse(task.createdAt) > 0 && Date.parse(task.lastUpdatedAt) >= Date.parse(task.createdAt));
  assert.equal(typeof task.ttlMs, 'number');
  assert.equal(task.pollIntervalMs, 1000);
  assert.equal(task.ttl, undefined, 'no 2025-11-25 ttl');
  assert.equal(task.pollInterval, undefined, 'no 2025-11-25 pollInterval');
}

/**
 * The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) at 2026-07-28, through the
 * official Tasks client (`@modelcontextprotocol/ext-tasks` over the v2 SDK client) and raw requests
 * for the wire: a wait called by a client that declares the extension answers with a task at once;
 * `tasks/get` shows it and, once a message arrives or a person decides, its result; `tasks/cancel`
 * stops the wait; a client without the extension gets the plain blocking call; every task is bound
 * to its token.
 */
describe('MCP 2026-07-28: the Tasks extension on the wait tools', () => {
  let server: TestServer;
  let secret: string;
  let otherSecret: string;
  let mailboxId: string;
  let client: Client2026;
  let session: TaskEnabledSession;

  const taskRow = async (taskId: string) =>
    (
      await server.db.query<{ status: string; wait_status: string | null }>(
        'SELECT t.status, w.status AS wait_status FROM tasks t LEFT JOIN waits w ON w.id = t.wait_id WHERE t.id = $1',
        [taskId],
      )
    )[0];
  const get = async (taskId: string, token = secret) => raw2026(server.url, token, 'tasks/get', { taskId });
  const inboxTask = (token = secret) => startInboxTask(server.url, token, mailboxId);

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_TASK_POLL_INTERVAL_SECONDS: '1' } });
    mailboxId = await createMailbox(server.admin);
    const scopes = { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxId] };
    secret = (await createToken(server.admin, scopes)).secret;
    otherSecret = (await createToken(server.admin, scopes)).secret;
    ({ client, session } = await connectTaskSession(server.url, secret));
  });

  after(async () => {
    await session?.close();
    await client?.close();
    await server?.close();
  });

  it('server/discover offers the extension: capabilities.extensions["io.modelcontextprotocol/tasks"] = {}', () => {
    assert.deepEqual(client.getServerCapabilities()?.extensions?.[TASKS_EXTENSION], {});
  });

  it('ext-tasks: monitor_approval runs as a task, tasks/get shows it working, an approval completes it', async () => {
    const { request_id: requestId } = await callOk2026(client, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Approve the 2026 task',
    });
    const execution = await session.callTool('monitor_approval', { request_id: requestId, timeout_seconds: 3600 });
    assert.equal(execution.kind, 'task');
    const taskId = execution.handle.taskId;
    const snapshot = await session.task(taskId).snapshot();
    assert.equal(snapshot.status, 'working');
    assert.equal(snapshot.retentionMs, 3600_000 + 3600_000, 'the wait timeout plus one hour, as at 2025-11-25');
    assert.equal(snapshot.suggestedPollIntervalMs, 1000);
    assert.equal((await taskRow(taskId)).status, 'working');

    assert.equal((await server.admin.post(`/v1/requests/${requestId}/approve`, { reason: 'fine' })).status, 200);
    const seen: TaskView[] = [];
    const { outcome } = await execution.settle({
      onEvent: (event) => {
        if (event.type === 'task') seen.push(event.task);
      },
    });
    assert.equal(outcome.status, 'completed');
    const result = (outcome as { result: any }).result;
    assert.notEqual(result.isError, true);
    assert.equal(result.structuredContent.matched, true);
    assert.deepEqual(result.structuredContent.requests, [{ request_id: requestId, state: 'approved' }]);
    assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
    for (const task of seen) assert.equal(task.taskId, taskId);
  });

  it('ext-tasks: monitor_inbox and email_await run as tasks and complete with the new message', async () => {
    const inbox = await session.callTool('monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
    const awaited = await session.callTool('email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId, subject_contains: 'task-2026' },
      timeout_seconds: 300,
    });
    assert.equal(inbox.kind, 'task');
    assert.equal(awaited.kind, 'task');
    const messageId = await ingest(server.admin, mailboxId, { subject: 'for the task-2026 waits' });
    for (const execution of [inbox, awaited]) {
      const { outcome } = await execution.settle();
      assert.equal(outcome.status, 'completed');
      const content = (outcome as { result: any }).result.structuredContent;
      assert.equal(content.matched, true);
      assert.deepEqual(
        content.events.map((e: { message_id: string }) => e.message_id),
        [messageId],
      );
    }
  });

  it('the wire: CreateTaskResult with resultType "task" (and the content [] the v2 SDK adds), then tasks/get', async () => {
    const res = await raw2026(server.url, secret, 'tools/call', {
      name: 'email_await',
      arguments: { event: { type: 'message_received', mailbox_id: mailboxId, subject_contains: 'wire' } },
    });
    assert.equal(res.status, 200);
    const created = res.json.result;
    assertExtensionTask(created, 'working');
    assert.equal(created.resultType, 'task');
    assert.equal(created.lastUpdatedAt, created.createdAt);
    assert.deepEqual(created.content, [], 'the v2 SDK gives every tools/call result a content array');
    assert.equal(created.isError, undefined);
    assert.equal((await taskRow(created.taskId)).status, 'working', 'durable before the answer');

    const working = (await get(created.taskId)).json.result;
    assert.equal(working.resultType, 'complete');
    assertExtensionTask(working, 'working');
    assert.equal(working.result, undefined);
    for (const field of ['taskId', 'createdAt', 'ttlMs', 'pollIntervalMs'])
      assert.equal(working[field], created[field]);

    const messageId = await ingest(server.admin, mailboxId, { subject: 'the wire' });
    const completed = await waitFor(
      'the task to complete',
      async () => {
        const task = (await get(created.taskId)).json.result;
        return task.status === 'completed' ? task : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    assertExtensionTask(completed, 'completed');
    assert.equal(completed.resultType, 'complete');
    assert.equal(completed.result.structuredContent.events[0].message_id, messageId);
    assert.equal(completed.result.isError, undefined);
    assert.equal(completed.error, undefined);
  });

  it('tasks/cancel acks {} and stops the wait everywhere; a second cancel and a cancel of an ended task ack too', async () => {
    const created = await inboxTask();
    const watched = () => activeWaits(server.url, 'message', 'persisted');
    await waitFor("the server to watch the task's wait", async () => (await watched()) === 1);
    const ack = await raw2026(server.url, secret, 'tasks/cancel', { taskId: created.taskId });
    assert.equal(ack.status, 200);
    assert.equal(ack.json.result.resultType, 'complete');
    const { resultType: _type, _meta: _meta, ...rest } = ack.json.result;
    assert.deepEqual(rest, {}, 'an empty acknowledgement');
    assert.deepEqual(await taskRow(created.taskId), { status: 'cancelled', wait_status: 'resolved' });
    await waitFor('the server to stop watching the wait', async () => (await watched()) === 0);
    const cancelled = (await get(created.taskId)).json.result;
    assertExtensionTask(cancelled, 'cancelled');
    assert.equal(cancelled.statusMessage, 'The task was cancelled by request.');
    assert.equal(cancelled.result, undefined);

    assert.equal(
      (await raw2026(server.url, secret, 'tasks/cancel', { taskId: created.taskId })).json.result.resultType,
      'complete',
    );
    assert.equal((await get(created.taskId)).json.result.status, 'cancelled', 'still cancelled');
  });

  it('ext-tasks: execution.cancel() ends in cancelled and the wait no longer parks', async () => {
    const execution = await session.callTool('monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
    assert.equal(execution.kind, 'task');
    await execution.cancel();
    assert.deepEqual(await taskRow(execution.handle.taskId), { status: 'cancelled', wait_status: 'resolved' });
    assert.equal((await session.task(execution.handle.taskId).snapshot()).status, 'cancelled');
  });

  it('tasks/update acks {} for a known task and ignores inputResponses (Alcarta never asks for input)', async () => {
    const created = await inboxTask();
    const ack = await raw2026(server.url, secret, 'tasks/update', {
      taskId: created.taskId,
      inputResponses: { never_issued: { action: 'accept', content: { x: 'y' } } },
    });
    assert.equal(ack.json.result?.resultType, 'complete', JSON.stringify(ack.json));
    assert.equal((await get(created.taskId)).json.result.status, 'working');
    await raw2026(server.url, secret, 'tasks/cancel', { taskId: created.taskId });
  });

  it('a client without the extension gets the plain blocking call, never a task', async () => {
    const plain = await connectMcp2026(server.url, secret);
    try {
      const result = await callOk2026(plain, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 1 });
      assert.equal(result.timed_out, true, 'it blocked until its timeout');
    } finally {
      await plain.close();
    }
    // The extension declared on an earlier request counts for nothing: only this request's capabilities.
    const res = await raw2026(
      server.url,
      secret,
      'tools/call',
      { name: 'monitor_inbox', arguments: { mailbox_id: mailboxId, timeout_seconds: 1 } },
      { capabilities: {} },
    );
    assert.equal(res.json.result.resultType, 'complete');
    assert.equal(res.json.result.taskId, undefined);
    assert.equal(res.json.result.structuredContent.timed_out, true);
  });

  it('a tool without task support answers plainly to a client with the extension', async () => {
    const res = await raw2026(server.url, secret, 'tools/call', {
      name: 'list_messages',
      arguments: { mailbox_id: mailboxId },
    });
    assert.equal(res.json.result.resultType, 'complete');
    assert.ok(Array.isArray(res.json.result.structuredContent.messages));
  });

  it('a call with a mistake in its arguments is the plain tool error, no task', async () => {
    const res = await raw2026(server.url, secret, 'tools/call', {
      name: 'monitor_inbox',
      arguments: { mailbox_id: mailboxId, timeout_seconds: -5 },
    });
    assert.equal(res.json.result.resultType, 'complete');
    assert.equal(res.json.result.isError, true);
    assert.equal(res.json.result.structuredContent.error, 'invalid_request');
    assert.equal(res.json.result.taskId, undefined);
  });

  it('a task failed with a tool error at 2025-11-25 is "completed" with that isError result at 2026-07-28', async () => {
    const legacy = await connectMcp(server.url, secret);
    try {
      const task = await startTask(legacy, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: -5 });
      assert.equal(task.status, 'failed', 'failed at 2025-11-25');
      const seen = (await get(task.taskId)).json.result;
      assertExtensionTask(seen, 'completed');
      assert.equal(seen.result.isError, true);
      assert.equal(seen.result.structuredContent.error, 'invalid_request');
      assert.equal(seen.error, undefined, 'failed is for JSON-RPC errors only');
      assert.equal((await legacy.experimental.tasks.getTask(task.taskId)).status, 'failed', '2025-11-25 unchanged');
    } finally {
      await legacy.close();
    }
  });

  it("another token's task is not found (-32602) for tasks/get, tasks/update and tasks/cancel; it goes on", async () => {
    const created = await inboxTask();
    for (const [method, params] of [
      ['tasks/get', { taskId: created.taskId }],
      ['tasks/update', { taskId: created.taskId, inputResponses: {} }],
      ['tasks/cancel', { taskId: created.taskId }],
    ] as const) {
      const res = await raw2026(server.url, otherSecret, method, params);
      assert.equal(res.json.error?.code, INVALID_PARAMS, `${method}: ${JSON.stringify(res.json)}`);
    }
    assert.deepEqual(await taskRow(created.taskId), { status: 'working', wait_status: 'pending' });
    await raw2026(server.url, secret, 'tasks/cancel', { taskId: created.taskId });
  });

  it('an unknown task id is -32602 for tasks/get, tasks/update and tasks/cancel', async () => {
    for (const taskId of ['task_doesnotexist0000000000000', 'nonsense', '']) {
      for (const [method, params] of [
        ['tasks/get', { taskId }],
        ['tasks/update', { taskId, inputResponses: {} }],
        ['tasks/cancel', { taskId }],
      ] as const) {
        const res = await raw2026(server.url, secret, method, params);
        assert.equal(res.json.error?.code, INVALID_PARAMS, `${method} ${taskId}: ${JSON.stringify(res.json)}`);
      }
    }
  });

  it('tasks/* of a request that does not declare the extension is -32021 naming it', async () => {
    const created = await inboxTask();
    const res = await raw2026(server.url, secret, 'tasks/get', { taskId: created.taskId }, { capabilities: {} });
    assert.equal(res.json.error?.code, MISSING_CLIENT_CAPABILITY);
    assert.deepEqual(res.json.error.data.requiredCapabilities, { extensions: { [TASKS_EXTENSION]: {} } });
    await raw2026(server.url, secret, 'tasks/cancel', { taskId: created.taskId });
  });

  it('subscriptions/listen for taskIds without the extension declared is -32021 naming it', async () => {
    const created = await inboxTask();
    const undeclared = await raw2026(
      server.url,
      secret,
      'subscriptions/listen',
      { notifications: { taskIds: [created.taskId] } },
      { capabilities: {} },
    );
    assert.equal(undeclared.json.error?.code, MISSING_CLIENT_CAPABILITY, undeclared.text);
    assert.deepEqual(undeclared.json.error.data.requiredCapabilities, { extensions: { [TASKS_EXTENSION]: {} } });
    await raw2026(server.url, secret, 'tasks/cancel', { taskId: created.taskId });
  });

  it('Mcp-Name must equal params.taskId: a mismatch or a missing header is -32020 (HTTP 400)', async () => {
    const created = await inboxTask();
    for (const name of ['task_someoneelse', '']) {
      const res = await raw2026(server.url, secret, 'tasks/cancel', { taskId: created.taskId }, { name });
      assert.equal(res.status, 400);
      assert.equal(res.json.error?.code, HEADER_MISMATCH, JSON.stringify(res.json));
    }
    assert.equal((await taskRow(created.taskId)).status, 'working', 'a refused cancel did nothing');
    await raw2026(server.url, secret, 'tasks/cancel', { taskId: created.taskId });
  });
});

/**
 * docs/agents.md "Tasks" and docs/operators.md "Replicas and shutdown" at 2026-07-28: a task of the
 * extension is the same durable task. Created on a replica that is then SIGKILLed, it completes on
 * another, which serves its tasks/get.
 */
describe('MCP 2026-07-28 Tasks extension across server processes', () => {
  const adminSecret = randomSecret();
  let db: TestDatabase;
  let replicas: ReplicaSet;
  let survivor: Replica;
  let secret: string;
  let mailboxId: string;

  before(async () => {
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, adminSecret);
    survivor = await replicas.start('B'); // alone first: it migrates
    mailboxId = await createMailbox(survivor.admin);
    secret = (await createToken(survivor.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxId] }))
      .secret;
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
  });

  it('a monitor_approval task created on A completes on B after A is SIGKILLed and a person approves', async () => {
    const a = await replicas.start('A', secret);
    const { request_id: requestId } = await callOk(a.client, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Outlive your replica at 2026-07-28',
    });
    const created = (
      await raw2026(a.server.url, secret, 'tools/call', {
        name: 'monitor_approval',
        arguments: { request_id: requestId, timeout_seconds: 3600 },
      })
    ).json.result;
    assert.equal(created.resultType, 'task');
    await replicas.stop(a, 'SIGKILL');

    const onB = async () => (await raw2026(survivor.server.url, secret, 'tasks/get', { taskId: created.taskId })).json;
    assert.equal((await onB()).result.status, 'working', 'the task outlives its replica');
    assert.equal((await survivor.admin.post(`/v1/requests/${requestId}/approve`, {})).status, 200);
    const completed = await waitFor(
      'B to complete the task',
      async () => {
        const { result } = await onB();
        return result.status === 'completed' ? result : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    assert.equal(completed.createdAt, created.createdAt);
    assert.equal(completed.result.structuredContent.matched, true);
    assert.deepEqual(completed.result.structuredContent.requests, [{ request_id: requestId, state: 'approved' }]);
  });

  it('a monitor_inbox task created on C completes on B (ext-tasks client) after C is SIGKILLed', async () => {
    const c = await replicas.start('C', secret);
    const { client, session } = await connectTaskSession(c.server.url, secret);
    const execution = await session.callTool('monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
    assert.equal(execution.kind, 'task');
    const taskId = execution.handle.taskId;
    await execution.detach();
    await session.close();
    await client.close();
    await replicas.stop(c, 'SIGKILL');

    const onB = await connectTaskSession(survivor.server.url, secret);
    try {
      const messageId = await ingest(survivor.admin, mailboxId, { subject: 'after C died' });
      const outcome = await onB.session.task(taskId).result();
      assert.equal(outcome.status, 'completed');
      const content = (outcome as { result: any }).result.structuredContent;
      assert.deepEqual(
        content.events.map((e: { message_id: string }) => e.message_id),
        [messageId],
      );
    } finally {
      await onB.session.close();
      await onB.client.close();
    }
  });
});
