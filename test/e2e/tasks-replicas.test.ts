import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SERVER_ERROR } from '#app/kernel/json-rpc.js';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk, connectMcp, streamMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { Replica, ReplicaSet } from '../support/replicas';
import { RestClient } from '../support/rest';
import { startTask, taskContent, taskResult } from '../support/tasks';
import { createMailbox, createToken, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const ids = (result: { events: Array<{ message_id: string }> }) => result.events.map((e) => e.message_id);

/**
 * docs/agents.md "Tasks" and docs/operators.md "Replicas and shutdown" with real server processes
 * on one database: a task is durable. Its wait lives in PostgreSQL, so a task created on a replica
 * that is then SIGKILLed is completed by another, which serves tasks/get and tasks/result; and the
 * SIGTERM of the replica a tasks/result blocks on ends that call, never the task.
 */
describe('MCP Tasks across server processes', () => {
  const adminSecret = randomSecret();
  let db: TestDatabase;
  let survivor: Replica;
  let admin: RestClient;
  let agentSecret: string;
  let mailboxId: string;
  let replicas: ReplicaSet;

  const taskStatus = async (taskId: string) =>
    (await db.query<{ status: string }>('SELECT status FROM tasks WHERE id = $1', [taskId]))[0]?.status;

  before(async () => {
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, adminSecret);
    survivor = await replicas.start('B'); // alone first: it migrates
    admin = survivor.admin;
    mailboxId = await createMailbox(admin);
    agentSecret = (await createToken(admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxId] }))
      .secret;
    // The agent, not the admin, talks MCP to every replica.
    await survivor.client.close();
    survivor.client = await connectMcp(survivor.server.url, agentSecret);
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
  });

  it('a message-wait task created on A completes after A is SIGKILLed: B serves tasks/get and tasks/result', async () => {
    const a = await replicas.start('A', agentSecret);
    const task = await startTask(a.client, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
    assert.equal(task.status, 'working');
    await replicas.stop(a, 'SIGKILL');
    assert.equal(await taskStatus(task.taskId), 'working', 'the task outlives its replica');

    const messageId = await ingest(admin, mailboxId, { subject: 'after A died' });
    const content = taskContent(await taskResult(survivor.client, task.taskId), task.taskId);
    assert.equal(content.matched, true);
    assert.deepEqual(ids(content), [messageId]);
    const got = await survivor.client.experimental.tasks.getTask(task.taskId);
    assert.equal(got.status, 'completed');
    assert.equal(got.createdAt, task.createdAt);
    assert.ok((await survivor.client.experimental.tasks.listTasks()).tasks.some((t) => t.taskId === task.taskId));
  });

  it('a request-wait task created on C completes on B after C is SIGKILLed and a person approves', async () => {
    const c = await replicas.start('C', agentSecret);
    const { request_id: requestId } = await callOk(c.client, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Outlive your replica',
    });
    const task = await startTask(c.client, 'monitor_approval', { request_id: requestId, timeout_seconds: 3600 });
    await replicas.stop(c, 'SIGKILL');

    assert.equal((await admin.post(`/v1/requests/${requestId}/approve`, {})).status, 200);
    await waitFor(
      'B to complete the task',
      async () => (await survivor.client.experimental.tasks.getTask(task.taskId)).status === 'completed',
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const content = taskContent(await taskResult(survivor.client, task.taskId), task.taskId);
    assert.equal(content.matched, true);
    assert.deepEqual(content.requests, [{ request_id: requestId, state: 'approved' }]);
  });

  it('SIGTERM of the replica that created a task and where tasks/result blocks ends that call, not the task', async () => {
    const d = await replicas.start('D', agentSecret);
    const task = await startTask(d.client, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
    const blocked = await streamMcp(
      d.server.url,
      agentSecret,
      { jsonrpc: '2.0', id: 31, method: 'tasks/result', params: { taskId: task.taskId } },
      { 'mcp-protocol-version': '2025-11-25' },
    );
    assert.equal(blocked.status, 200);
    await waitFor('tasks/result to park on D', async () => (await activeWaits(d.server.url, 'message', 'poll')) === 1, {
      timeoutMs: 30_000,
    });

    await replicas.stop(d, 'SIGTERM');
    const { messages } = await blocked.done;
    const answer = messages.find((m) => m.id === 31);
    assert.ok(answer, `D answered the blocked call before it exited: ${JSON.stringify(messages)}`);
    assert.equal(answer.result, undefined, 'no result: the task has none yet');
    assert.equal(answer.error.code, SERVER_ERROR, 'a replica shutting down is -32000 (retry), not an internal error');
    assert.equal(answer.error.data.reason, 'shutting_down');
    assert.equal(await taskStatus(task.taskId), 'working', 'the shutdown did not end the task');
    assert.equal((await survivor.client.experimental.tasks.getTask(task.taskId)).status, 'working');

    const messageId = await ingest(admin, mailboxId, { subject: 'after D stopped' });
    const content = taskContent(await taskResult(survivor.client, task.taskId), task.taskId);
    assert.deepEqual(ids(content), [messageId]);
    assert.equal(await taskStatus(task.taskId), 'completed');
  });
});
