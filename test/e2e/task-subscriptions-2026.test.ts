import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client as Client2026, SubscriptionFilter } from '@modelcontextprotocol/client';
import type { TaskEnabledSession } from '@modelcontextprotocol/ext-tasks/client';
import { streamMcp } from '../support/mcp';
import { callOk2026, envelope, revision2026Headers } from '../support/mcp-2026';
import { activeWaits } from '../support/metrics';
import { connectTaskSession, raw2026, startInboxTask, TASKS_CAPABILITIES } from '../support/tasks-2026';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const INVALID_PARAMS = -32602;
const HEADER_MISMATCH = -32020;
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

/** A `subscriptions/listen` with the Tasks extension declared, read as it arrives. */
function listen(baseUrl: string, token: string, id: string, notifications: unknown, headers = {}) {
  return streamMcp(
    baseUrl,
    token,
    {
      jsonrpc: '2.0',
      id,
      method: 'subscriptions/listen',
      params: { notifications, _meta: envelope(TASKS_CAPABILITIES) },
    },
    { ...revision2026Headers('subscriptions/listen'), ...headers },
  );
}

/** Every message of the subscription `id` carries its id in `_meta` (the result in its own). */
function assertStamped(messages: any[], id: string): void {
  for (const m of messages) {
    const meta = m.method ? m.params._meta : m.result?._meta;
    assert.equal(meta?.[SUBSCRIPTION_ID], id, JSON.stringify(m));
  }
}

/** The graceful end: the listen request's result, `resultType: "complete"`, the server's identity. */
function assertGracefulEnd(message: any, id: string): void {
  assert.equal(message.id, id, JSON.stringify(message));
  assert.equal(message.result?.resultType, 'complete', JSON.stringify(message));
  assert.equal(message.result._meta[SUBSCRIPTION_ID], id);
  assert.equal(message.result._meta[SERVER_INFO].name, 'alcarta');
}

/**
 * `notifications/tasks` over `subscriptions/listen` (Tasks extension, SEP-2663) at 2026-07-28: a
 * client that declares the extension and names its task ids gets the acknowledged ids, each task's
 * current DetailedTask, then its end (completed with the result, or cancelled), stamped with the
 * subscription id, and the subscription ends gracefully once every task has ended. Other tokens'
 * and unknown ids are not acknowledged; a closed stream releases the server's wait; a replica
 * shutting down ends the subscription gracefully.
 */
describe('MCP 2026-07-28: notifications/tasks over subscriptions/listen', () => {
  let server: TestServer;
  let secret: string;
  let otherSecret: string;
  let mailboxId: string;
  let client: Client2026;
  let session: TaskEnabledSession;

  const inboxTask = async (token = secret): Promise<string> =>
    (await startInboxTask(server.url, token, mailboxId)).taskId as string;
  const cancel = (taskId: string, token = secret) => raw2026(server.url, token, 'tasks/cancel', { taskId });
  const resultWaits = () => activeWaits(server.url, 'message', 'poll');

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_MAX_ACTIVE_TASKS_PER_TOKEN: '10' } });
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

  it('v2 client listen(): an approval completes the task; notifications/tasks brings the result, then a graceful end', async () => {
    const seen: any[] = [];
    const prior = client.fallbackNotificationHandler;
    client.fallbackNotificationHandler = async (notification) => {
      seen.push(notification);
      await prior?.(notification);
    };
    try {
      const { request_id: requestId } = await callOk2026(client, 'request_approval', {
        mailbox_id: mailboxId,
        title: 'Approve the subscribed task',
      });
      const execution = await session.callTool('monitor_approval', { request_id: requestId, timeout_seconds: 3600 });
      assert.equal(execution.kind, 'task');
      const taskId = execution.handle.taskId;
      // The v2 SDK's SubscriptionFilter knows only the core fields, and so does its `honoredFilter`
      // (it drops the acknowledged taskIds): the wire test below reads the acknowledgement.
      const subscription = await client.listen({ taskIds: [taskId] } as SubscriptionFilter);
      const ofTask = () => seen.filter((n) => n.method === 'notifications/tasks' && n.params.taskId === taskId);
      await waitFor('the current state after the ack', () => ofTask().length === 1);
      assert.equal(ofTask()[0].params.status, 'working');

      assert.equal((await server.admin.post(`/v1/requests/${requestId}/approve`, { reason: 'ok' })).status, 200);
      assert.equal(await subscription.closed, 'graceful', 'every task ended: the server ends the subscription');
      const [working, completed] = ofTask();
      assert.equal(ofTask().length, 2);
      assert.equal(completed.params.status, 'completed');
      assert.equal(completed.params.result.resultType, 'complete');
      assert.equal(completed.params.result.structuredContent.matched, true);
      assert.deepEqual(completed.params.result.structuredContent.requests, [
        { request_id: requestId, state: 'approved' },
      ]);
      const subscriptionId = working.params._meta[SUBSCRIPTION_ID];
      assert.match(String(subscriptionId), /^listen:/, 'stamped with the listen request id');
      assert.equal(completed.params._meta[SUBSCRIPTION_ID], subscriptionId);
      // Identical to tasks/get at that moment, but for the stamp.
      const { _meta: _stamp, ...params } = completed.params;
      const {
        resultType: _type,
        _meta: _meta,
        ...got
      } = (await raw2026(server.url, secret, 'tasks/get', { taskId })).json.result;
      assert.deepEqual(params, got);
      assert.equal((await execution.settle()).outcome.status, 'completed', 'ext-tasks agrees');
    } finally {
      client.fallbackNotificationHandler = prior;
    }
  });

  it('the wire: ack first, the working task, then cancelled after tasks/cancel, then the result; all stamped', async () => {
    const taskId = await inboxTask();
    const stream = await listen(server.url, secret, 'sub-cancel', { taskIds: [taskId] });
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
    await waitFor('the wait for the task to park', async () => (await resultWaits()) === 1);
    assert.equal((await cancel(taskId)).json.result?.resultType, 'complete');
    const { messages, broken } = await stream.done;
    assert.equal(broken, false);
    assert.deepEqual(
      messages.map((m) => m.method ?? 'result'),
      ['notifications/subscriptions/acknowledged', 'notifications/tasks', 'notifications/tasks', 'result'],
    );
    assertStamped(messages, 'sub-cancel');
    assert.deepEqual(messages[0].params.notifications, { taskIds: [taskId] });
    assert.equal(messages[1].params.status, 'working');
    assert.equal(messages[2].params.status, 'cancelled');
    assert.equal(messages[2].params.statusMessage, 'The task was cancelled by request.');
    assert.equal(messages[2].params.result, undefined);
    assertGracefulEnd(messages[3], 'sub-cancel');
    assert.equal(await resultWaits(), 0);

    // Listening to a task that has ended: its final state at once, then the end.
    const again = await (await listen(server.url, secret, 'sub-ended', { taskIds: [taskId] })).done;
    assert.deepEqual(
      again.messages.map((m) => m.params?.status ?? m.method ?? 'result'),
      ['notifications/subscriptions/acknowledged', 'cancelled', 'result'],
    );
  });

  it("another token's task and unknown ids are not acknowledged and bring nothing; nor do the core filter fields", async () => {
    const own = await inboxTask();
    const others = await inboxTask(otherSecret);
    const stream = await listen(server.url, secret, 'sub-mixed', {
      taskIds: [others, 'task_doesnotexist0000000000000', 'nonsense', own, own],
      toolsListChanged: true,
      resourceSubscriptions: ['file:///x'],
    });
    await waitFor('the wait for the own task to park', async () => (await resultWaits()) === 1);
    await cancel(own);
    const { messages } = await stream.done;
    assert.deepEqual(messages[0].params.notifications, { taskIds: [own] }, 'only the caller\u2019s own task, once');
    const notified = messages.filter((m) => m.method === 'notifications/tasks');
    assert.deepEqual(
      notified.map((m) => [m.params.taskId, m.params.status]),
      [
        [own, 'working'],
        [own, 'cancelled'],
      ],
    );
    assert.ok(!stream.text.includes(others), "nothing names the other token's task");

    const none = await (await listen(server.url, secret, 'sub-none', { taskIds: [others, 'nonsense'] })).done;
    assert.deepEqual(none.messages[0].params.notifications, {}, 'nothing honored');
    assert.equal(none.messages.length, 2);
    assertGracefulEnd(none.messages[1], 'sub-none');
    assert.equal(
      (await raw2026(server.url, otherSecret, 'tasks/get', { taskId: others })).json.result.status,
      'working',
    );
    await cancel(others, otherSecret);
  });

  it("closing the subscription (client.close()) releases the server's wait", async () => {
    const taskId = await inboxTask();
    const subscription = await client.listen({ taskIds: [taskId] } as SubscriptionFilter);
    await waitFor('the wait for the task to park', async () => (await resultWaits()) === 1);
    await subscription.close();
    assert.equal(await subscription.closed, 'local');
    await waitFor('the wait to be released', async () => (await resultWaits()) === 0);
    const row = await server.db.query<{ status: string }>('SELECT status FROM tasks WHERE id = $1', [taskId]);
    assert.equal(row[0].status, 'working', 'the task itself goes on');
    await cancel(taskId);
  });

  it('a taskIds that is not an array of strings, or too long, is -32602, not a 500', async () => {
    const tooMany = Array.from({ length: 11 }, (_, i) => `task_${i}`);
    for (const taskIds of ['task_x', [1], [null], {}, null, tooMany]) {
      const res = await raw2026(server.url, secret, 'subscriptions/listen', { notifications: { taskIds } });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.error?.code, INVALID_PARAMS, `${JSON.stringify(taskIds)}: ${res.text}`);
    }
  });

  it("the SDK's refusals stay: an Mcp-Method header naming another method is -32020", async () => {
    const taskId = await inboxTask();
    const stream = await listen(
      server.url,
      secret,
      'sub-header',
      { taskIds: [taskId] },
      { 'mcp-method': 'tools/list' },
    );
    assert.equal(stream.status, 400);
    const { messages } = await stream.done;
    assert.equal(messages.length, 0);
    assert.equal(JSON.parse(stream.text).error.code, HEADER_MISMATCH);
    await cancel(taskId);
  });
});

describe('MCP 2026-07-28: a task subscription when its replica shuts down', () => {
  let server: TestServer | undefined;

  after(async () => {
    await server?.close();
  });

  it('keeps the quiet stream alive, then ends gracefully with the listen result, so the client listens again', async () => {
    server = await startTestServer({ env: { ALCARTA_KEEPALIVE_SECONDS: '1' } });
    const mailboxId = await createMailbox(server.admin);
    const { secret } = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const created = await raw2026(server.url, secret, 'tools/call', {
      name: 'monitor_inbox',
      arguments: { mailbox_id: mailboxId, timeout_seconds: 300 },
    });
    const taskId = created.json.result.taskId as string;
    const stream = await listen(server.url, secret, 'sub-shutdown', { taskIds: [taskId] });
    const url = server.url;
    await waitFor('the wait for the task to park', async () => (await activeWaits(url, 'message', 'poll')) === 1);
    await waitFor('a keep-alive comment', () => stream.text.includes('\n: keepalive\n\n'), { timeoutMs: 15_000 });
    const closing = server.close();
    server = undefined;
    const { messages, broken } = await stream.done;
    await closing;
    assert.equal(broken, false);
    assert.deepEqual(
      messages.map((m) => m.params?.status ?? m.method ?? 'result'),
      ['notifications/subscriptions/acknowledged', 'working', 'result'],
    );
    assertGracefulEnd(messages[2], 'sub-shutdown');
  });
});
