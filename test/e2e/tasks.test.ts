import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, RELATED_TASK_META_KEY } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult, Progress, Task } from '@modelcontextprotocol/sdk/types.js';
import { callOk, connectMcp, streamMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { assertTaskShape, startTask, taskContent, taskResult } from '../support/tasks';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const ids = (result: { events: Array<{ message_id: string }> }) => result.events.map((e) => e.message_id);

/**
 * docs/agents.md "Tasks", the life of a task through the official SDK client: a task-augmented call
 * of a wait returns a working task at once; the wait runs server-side, and when mail arrives, a
 * person decides, or the wait times out, the task is `completed` with the poll result as its
 * CallToolResult. `tasks/result` blocks until then — with progress notifications when asked, and `:
 * keepalive` comments on its SSE stream.
 */
describe('MCP Tasks: lifecycle', () => {
  let server: TestServer;
  let agent: Client;
  let secret: string;
  let mailboxId: string;

  /** Runs `callToolStream` to its end; `onCreated` runs once the task exists (to make it resolve). */
  const streamTask = async (
    name: string,
    args: Record<string, unknown>,
    onCreated: (task: Task) => Promise<unknown>,
  ): Promise<{ created: Task; statuses: Task[]; result: CallToolResult }> => {
    let created: Task | undefined;
    const statuses: Task[] = [];
    let result: CallToolResult | undefined;
    const stream = agent.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
      task: { ttl: 600_000 },
    });
    for await (const message of stream) {
      if (message.type === 'taskCreated') {
        created = message.task;
        await onCreated(message.task);
      } else if (message.type === 'taskStatus') statuses.push(message.task);
      else if (message.type === 'result') result = message.result;
      else assert.fail(`the stream failed: ${message.error.message}`);
    }
    assert.ok(created && result, 'taskCreated and a result');
    return { created, statuses, result };
  };

  /** The created task is working, with every field, and the stream ends in `completed`. */
  const assertLifecycle = ({ created, statuses }: { created: Task; statuses: Task[] }) => {
    assertTaskShape(created, 'working');
    assert.equal(created.ttl, 600_000, 'the requested ttl');
    assert.equal(created.lastUpdatedAt, created.createdAt);
    const last = statuses[statuses.length - 1];
    assert.equal(last.status, 'completed');
    assert.equal(last.taskId, created.taskId);
    assert.equal(last.createdAt, created.createdAt);
    assert.ok(Date.parse(last.lastUpdatedAt) >= Date.parse(created.createdAt));
    for (const seen of statuses.slice(0, -1)) assert.equal(seen.status, 'working');
  };

  const pollsParked = (n: number) =>
    waitFor(`${n} parked tasks/result`, async () => (await activeWaits(server.url, undefined, 'poll')) === n, {
      timeoutMs: 30_000,
    });

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_KEEPALIVE_SECONDS: '1' } });
    mailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, {
      scopes: ['mail:read', 'approvals:read'],
      mailboxes: [mailboxId],
    });
    secret = token.secret;
    agent = await connectMcp(server.url, secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  it('monitor_inbox: working task → a message arrives → completed with the match as its result', async () => {
    let messageId = '';
    const run = await streamTask('monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 }, async () => {
      messageId = await ingest(server.admin, mailboxId, { subject: 'for the monitor_inbox task' });
    });
    assertLifecycle(run);
    const content = taskContent(run.result, run.created.taskId);
    assert.equal(content.matched, true);
    assert.equal(content.timed_out, false);
    assert.equal(content.shutdown, false);
    assert.deepEqual(ids(content), [messageId]);
    assert.equal(content.events[0].type, 'message_received');
    assert.equal(content.events[0].mailbox_id, mailboxId);
    assert.equal(typeof content.next_cursor, 'string');
  });

  it('email_await message wait as a task: since_cursor and the filters apply as in a plain call', async () => {
    const { next_cursor: cursor } = await callOk(agent, 'list_messages', { mailbox_id: mailboxId });
    const skipped = await ingest(server.admin, mailboxId, { subject: 'no match here' });
    let matching = '';
    const run = await streamTask(
      'email_await',
      {
        event: { type: 'message_received', mailbox_id: mailboxId, subject_contains: 'invoice' },
        since_cursor: cursor,
        timeout_seconds: 300,
      },
      async () => {
        matching = await ingest(server.admin, mailboxId, { subject: 'Your INVOICE' });
      },
    );
    assertLifecycle(run);
    const content = taskContent(run.result, run.created.taskId);
    assert.equal(content.matched, true);
    assert.deepEqual(ids(content), [matching]);
    assert.notEqual(skipped, matching);
  });

  it('monitor_approval: completed when a person approves through the REST API', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Approve the task',
    });
    const run = await streamTask('monitor_approval', { request_id: requestId, timeout_seconds: 3600 }, async () => {
      const res = await server.admin.post(`/v1/requests/${requestId}/approve`, { reason: 'fine' });
      assert.equal(res.status, 200);
    });
    assertLifecycle(run);
    const content = taskContent(run.result, run.created.taskId);
    assert.equal(content.matched, true);
    assert.deepEqual(content.requests, [{ request_id: requestId, state: 'approved' }]);
    assert.equal(content.events.length, 1);
    assert.equal(content.events[0].type, 'request_state_changed');
    assert.equal(content.events[0].request_id, requestId);
    assert.equal(content.events[0].state, 'approved');
    assert.equal(content.events[0].previous_state, 'pending');
  });

  it('a wait that times out completes the task with timed_out: true', async () => {
    const run = await streamTask('monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 1 }, async () => {});
    assertLifecycle(run);
    const { next_cursor: cursor, ...rest } = taskContent(run.result, run.created.taskId);
    assert.deepEqual(rest, { matched: false, timed_out: true, shutdown: false, events: [] });
    assert.equal(typeof cursor, 'string');
  });

  it('tasks/result blocks while the task works, and returns once it completes', async () => {
    const task = await startTask(agent, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
    let returned = false;
    const pending = taskResult(agent, task.taskId).finally(() => (returned = true));
    await pollsParked(1);
    assert.equal(returned, false, 'tasks/result has not returned while the task works');
    assert.equal((await agent.experimental.tasks.getTask(task.taskId)).status, 'working');

    const messageId = await ingest(server.admin, mailboxId, { subject: 'unblocks tasks/result' });
    const content = taskContent(await pending, task.taskId);
    assert.deepEqual(ids(content), [messageId]);
    assert.equal((await agent.experimental.tasks.getTask(task.taskId)).status, 'completed');
    assert.deepEqual(await taskResult(agent, task.taskId), await pending, 'asked again: the same result');
    await pollsParked(0);
  });

  it('a blocked tasks/result sends progress (onprogress + resetTimeoutOnProgress) and outlasts its timeout', async () => {
    const task = await startTask(agent, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
    const seen: Progress[] = [];
    // Progress comes every second; the 4 s request timer is reset by each, so 6 of them outlast it.
    const pending = taskResult(agent, task.taskId, {
      timeout: 4000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => seen.push(p),
    });
    await waitFor('6 progress notifications', () => seen.length >= 6, { timeoutMs: 60_000 });
    const messageId = await ingest(server.admin, mailboxId, { subject: 'after progress' });
    assert.deepEqual(ids(taskContent(await pending, task.taskId)), [messageId]);
    const values = seen.map((p) => p.progress);
    for (let i = 1; i < values.length; i++) assert.ok(values[i] >= values[i - 1], `increasing: ${values.join(', ')}`);
  });

  it('raw tasks/result answers as an SSE stream with `: keepalive` comments while it blocks', async () => {
    const task = await startTask(agent, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
    const stream = await streamMcp(
      server.url,
      secret,
      { jsonrpc: '2.0', id: 21, method: 'tasks/result', params: { taskId: task.taskId } },
      { 'mcp-protocol-version': '2025-11-25' },
    );
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
    await waitFor('a keep-alive comment', () => stream.text.split('\n').includes(': keepalive'), {
      timeoutMs: 30_000,
    });
    assert.ok(!stream.text.includes('data: '), 'no response yet');

    const messageId = await ingest(server.admin, mailboxId, { subject: 'ends the stream' });
    const { messages, broken } = await stream.done;
    assert.equal(broken, false);
    assert.equal(messages.length, 1);
    assert.equal(messages[0].id, 21);
    const { result } = messages[0];
    assert.deepEqual(result._meta[RELATED_TASK_META_KEY], { taskId: task.taskId });
    assert.deepEqual(ids(result.structuredContent), [messageId]);
    assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
  });
});
