import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { rejectsWith, startTask, taskResult, taskToolError } from '../support/tasks';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const MAX_TTL_SECONDS = 120;
const MAX_ACTIVE = 3;

/**
 * docs/agents.md "Tasks" limits, on a server with ALCARTA_TASK_MAX_TTL_SECONDS=120 and
 * ALCARTA_MAX_ACTIVE_TASKS_PER_TOKEN=3: a longer ttl (requested or default) is cut to the maximum;
 * a task past its ttl is purged by the server's own sweeper (it runs every 30 s), wait and all;
 * beyond the active-task cap a task-augmented call gives a failed task whose result is the tool
 * error `limit_exceeded`, and a slot freed by a cancel can be used again.
 */
describe('MCP Tasks: ttl and limits', () => {
  let server: TestServer;
  let mailboxId: string;
  const clients: Client[] = [];

  const newAgent = async () => {
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const client = await connectMcp(server.url, token.secret);
    clients.push(client);
    return client;
  };
  const inboxTask = (client: Client, ttl?: number) =>
    startTask(client, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 }, ttl);

  before(async () => {
    server = await startTestServer({
      env: {
        ALCARTA_TASK_MAX_TTL_SECONDS: String(MAX_TTL_SECONDS),
        ALCARTA_MAX_ACTIVE_TASKS_PER_TOKEN: String(MAX_ACTIVE),
      },
    });
    mailboxId = await createMailbox(server.admin);
  });

  after(async () => {
    for (const client of clients) await client.close();
    await server?.close();
  });

  it('a ttl up to ALCARTA_TASK_MAX_TTL_SECONDS is honoured; a longer one, requested or default, is cut to it', async () => {
    const agent = await newAgent();
    assert.equal((await inboxTask(agent, 60_000)).ttl, 60_000);
    assert.equal((await inboxTask(agent, MAX_TTL_SECONDS * 1000 + 1)).ttl, MAX_TTL_SECONDS * 1000);
    assert.equal((await inboxTask(agent)).ttl, MAX_TTL_SECONDS * 1000, 'the default (5 min + 1 h) is cut too');
  });

  it('a task past its ttl is purged, with its wait; a tasks/result blocked on it then gets -32602', async () => {
    const agent = await newAgent();
    const task = await inboxTask(agent, 1000);
    assert.equal(task.ttl, 1000);
    const [{ wait_id: waitId }] = await server.db.query<{ wait_id: string }>(
      'SELECT wait_id FROM tasks WHERE id = $1',
      [task.taskId],
    );
    assert.equal(typeof waitId, 'string');
    // Blocked on a task that will never complete; the SDK's own 60 s request timeout would be -32001.
    const blocked = rejectsWith(taskResult(agent, task.taskId), ErrorCode.InvalidParams, 'the blocked tasks/result');
    await waitFor('tasks/result to park', async () => (await activeWaits(server.url, undefined, 'poll')) === 1, {
      timeoutMs: 30_000,
    });
    // The sweeper runs every 30 s: a generous deadline, no shortcut.
    await waitFor(
      'the expired task to be purged',
      async () => {
        await rejectsWith(agent.experimental.tasks.getTask(task.taskId), ErrorCode.InvalidParams, 'tasks/get');
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    assert.deepEqual(await server.db.query('SELECT id FROM tasks WHERE id = $1', [task.taskId]), []);
    assert.deepEqual(await server.db.query('SELECT id FROM waits WHERE id = $1', [waitId]), []);
    assert.deepEqual((await agent.experimental.tasks.listTasks()).tasks, []);
    await blocked;
  });

  it(`beyond ${MAX_ACTIVE} working tasks per token: a failed task with limit_exceeded; a cancel frees a slot`, async () => {
    const agent = await newAgent();
    const working = [];
    for (let i = 0; i < MAX_ACTIVE; i++) working.push(await inboxTask(agent));
    assert.deepEqual(
      working.map((t) => t.status),
      ['working', 'working', 'working'],
    );

    const refused = await inboxTask(agent);
    assert.equal(refused.status, 'failed');
    assert.equal((await agent.experimental.tasks.getTask(refused.taskId)).status, 'failed');
    const error = taskToolError(await taskResult(agent, refused.taskId), refused.taskId);
    assert.equal(error.error, 'limit_exceeded');
    assert.equal(error.reason, 'too_many_active_tasks');
    assert.equal(typeof error.message, 'string');
    assert.equal((await inboxTask(agent)).status, 'failed', 'failed tasks do not free a slot');

    const other = await newAgent();
    assert.equal((await inboxTask(other)).status, 'working', 'the cap is per token');

    await agent.experimental.tasks.cancelTask(working[0].taskId);
    assert.equal((await inboxTask(agent)).status, 'working', 'a cancel frees a slot');
    assert.equal((await inboxTask(agent)).status, 'failed', 'and only one');
  });

  it('concurrent task-augmented calls of one token cannot overshoot the cap', async () => {
    const agent = await newAgent();
    const tasks = await Promise.all(Array.from({ length: 8 }, () => inboxTask(agent)));
    assert.equal(tasks.filter((t) => t.status === 'working').length, MAX_ACTIVE);
    assert.equal(tasks.filter((t) => t.status === 'failed').length, 8 - MAX_ACTIVE);
    for (const t of tasks.filter((task) => task.status === 'working'))
      await agent.experimental.tasks.cancelTask(t.taskId);
  });
});
