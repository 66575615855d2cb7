import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { callOk, connectMcp, rawMcp } from '../support/mcp';
import { rejectsWith, startTask } from '../support/tasks';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';

const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };
const TASK_TOOLS = ['email_await', 'monitor_approval', 'monitor_inbox'];
const OLDER_REVISIONS = ['2025-06-18', '2025-03-26'];

const initialize = (protocolVersion: string) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion, capabilities: {}, clientInfo: { name: 'tasks-revisions', version: '1.0.0' } },
});

/**
 * docs/agents.md "Tasks" by protocol revision: at 2025-11-25 the server declares the tasks
 * capability, the three waits carry `execution.taskSupport: "optional"`, and a task-augmented call
 * of any other tool is -32601 before it runs. At 2025-06-18 and 2025-03-26 there are no tasks at
 * all: no capability, no `execution`, a `task` member of tools/call is ignored (the call runs
 * normally and no task is stored) and every tasks/* method is -32601.
 */
describe('MCP Tasks by protocol revision', () => {
  let server: TestServer;
  let agent: Client;
  let secret: string;
  let tokenId: string;
  let mailboxId: string;
  /** Only the -32601 test uses it: nothing may ever be created in it. */
  let quietMailboxId: string;

  const raw = (revision: string | undefined, body: unknown) =>
    rawMcp(server.url, secret, body, revision ? { 'mcp-protocol-version': revision } : {});
  const call = (revision: string, id: number, name: string, args: Record<string, unknown>, task: object) =>
    raw(revision, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, task } });
  const storedTasks = async () =>
    (await server.db.query<{ id: string }>('SELECT id FROM tasks WHERE token_id = $1', [tokenId])).map((r) => r.id);

  before(async () => {
    server = await startTestServer();
    mailboxId = await createMailbox(server.admin);
    quietMailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, {
      scopes: ['mail:read', 'mail:send', 'approvals:read'],
      mailboxes: [mailboxId, quietMailboxId],
    });
    secret = token.secret;
    tokenId = token.id;
    agent = await connectMcp(server.url, secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  describe('2025-11-25', () => {
    it('initialize declares capabilities.tasks = {list, cancel, requests.tools.call}', async () => {
      assert.deepEqual(agent.getServerCapabilities()?.tasks, TASKS_CAPABILITY, 'negotiated by the SDK client');
      const res = await raw(undefined, initialize('2025-11-25'));
      assert.equal(res.json.result.protocolVersion, '2025-11-25');
      assert.deepEqual(res.json.result.capabilities.tasks, TASKS_CAPABILITY);
    });

    it('tools/list: exactly email_await, monitor_inbox and monitor_approval carry taskSupport "optional"', async () => {
      const viaSdk = (await agent.listTools()).tools;
      const viaRaw = (await raw('2025-11-25', { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} })).json.result
        .tools as typeof viaSdk;
      for (const tools of [viaSdk, viaRaw]) {
        assert.ok(tools.length > TASK_TOOLS.length);
        const optional = tools.filter((t) => t.execution?.taskSupport === 'optional').map((t) => t.name);
        assert.deepEqual(optional.sort(), TASK_TOOLS);
        for (const tool of tools.filter((t) => !TASK_TOOLS.includes(t.name))) {
          assert.ok(
            tool.execution === undefined || tool.execution.taskSupport === 'forbidden',
            `${tool.name}: ${JSON.stringify(tool.execution)}`,
          );
        }
      }
    });

    it('a task-augmented call of a tool without task support is -32601 and the tool does not run', async () => {
      const calls: Array<[string, Record<string, unknown>]> = [
        [
          'send_email',
          { mailbox_id: quietMailboxId, to: ['someone@example.org'], subject: 'Not sent', text: 'Never created' },
        ],
        ['request_approval', { mailbox_id: quietMailboxId, title: 'Never created' }],
        ['list_mailboxes', {}],
        ['list_messages', { mailbox_id: quietMailboxId }],
      ];
      for (const [name, args] of calls) {
        await rejectsWith(startTask(agent, name, args), ErrorCode.MethodNotFound, name);
      }
      // The same through raw JSON-RPC, where nothing else could interfere.
      const res = await call(
        '2025-11-25',
        9,
        'request_approval',
        { mailbox_id: quietMailboxId, title: 'Never created' },
        {},
      );
      assert.equal(res.json.id, 9);
      assert.equal(res.json.error.code, ErrorCode.MethodNotFound);

      const listed = await server.admin.get(`/v1/requests?mailbox_id=${quietMailboxId}`);
      assert.equal(listed.status, 200);
      assert.deepEqual(listed.body.requests, [], 'no approval request was created');
      const stored = await server.db.query('SELECT id FROM approval_requests WHERE mailbox_id = $1', [quietMailboxId]);
      assert.deepEqual(stored, []);
      assert.deepEqual(await storedTasks(), [], 'and no task');
    });
  });

  for (const revision of OLDER_REVISIONS) {
    describe(revision, () => {
      it('initialize declares no tasks capability, and no tool carries execution', async () => {
        const init = await raw(undefined, initialize(revision));
        assert.equal(init.json.result.protocolVersion, revision);
        assert.ok(init.json.result.capabilities.tools, 'tools are declared');
        assert.equal(init.json.result.capabilities.tasks, undefined);

        const { tools } = (await raw(revision, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} })).json
          .result as { tools: Array<Record<string, unknown>> };
        assert.ok(tools.some((t) => t.name === 'email_await'));
        for (const tool of tools) assert.equal(tool.execution, undefined, `${tool.name as string} has execution`);
      });

      it('a task member of tools/call is ignored: the call runs normally and no task is stored', async () => {
        const before = await storedTasks();
        const { next_cursor: cursor } = await callOk(agent, 'list_messages', { mailbox_id: mailboxId });
        const messageId = await ingest(server.admin, mailboxId, { subject: `at ${revision}` });

        const mailboxes = await call(revision, 3, 'list_mailboxes', {}, {});
        assert.equal(mailboxes.json.error, undefined, JSON.stringify(mailboxes.json.error));
        assert.ok(
          mailboxes.json.result.structuredContent.mailboxes.some(
            (m: { mailbox_id: string }) => m.mailbox_id === mailboxId,
          ),
        );

        // A wait returns its normal poll result on the same response (here at once: the message is there).
        const waitArgs = {
          event: { type: 'message_received', mailbox_id: mailboxId },
          since_cursor: cursor,
          timeout_seconds: 30,
        };
        const waited = await call(revision, 4, 'email_await', waitArgs, { ttl: 60_000 });
        assert.equal(waited.json.id, 4);
        assert.equal(waited.json.result.task, undefined, 'no CreateTaskResult');
        const result = waited.json.result.structuredContent;
        assert.equal(result.matched, true);
        assert.equal(result.timed_out, false);
        assert.deepEqual(
          result.events.map((e: { message_id: string }) => e.message_id),
          [messageId],
        );
        assert.equal(typeof result.next_cursor, 'string');

        const inbox = await call(revision, 5, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 0 }, {});
        assert.deepEqual(
          { ...inbox.json.result.structuredContent, next_cursor: undefined },
          { matched: false, timed_out: true, shutdown: false, events: [], next_cursor: undefined },
        );

        const check = await call(revision, 6, 'request_approval', { mailbox_id: mailboxId, title: 'Runs' }, {});
        assert.equal(check.json.result.structuredContent.state, 'pending', 'a tool without task support runs too');

        assert.deepEqual(await storedTasks(), before, 'no task was created');
      });

      it('tasks/get, tasks/list, tasks/result and tasks/cancel are -32601 (with or without the header)', async () => {
        // A real task of this token, created at 2025-11-25: it is still invisible at the older revision.
        const task = await startTask(agent, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 300 });
        const headers = revision === '2025-03-26' ? [revision, undefined] : [revision];
        for (const header of headers) {
          for (const [id, method, params] of [
            [11, 'tasks/get', { taskId: task.taskId }],
            [12, 'tasks/list', {}],
            [13, 'tasks/result', { taskId: task.taskId }],
            [14, 'tasks/cancel', { taskId: task.taskId }],
          ] as const) {
            const res = await raw(header, { jsonrpc: '2.0', id, method, params });
            assert.equal(res.json.id, id, method);
            assert.equal(res.json.error?.code, ErrorCode.MethodNotFound, `${method} at ${header ?? 'no header'}`);
          }
        }
        assert.equal((await agent.experimental.tasks.getTask(task.taskId)).status, 'working', 'not cancelled');
        await agent.experimental.tasks.cancelTask(task.taskId);
      });
    });
  }
});
