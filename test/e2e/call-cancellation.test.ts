import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { TokenService } from '#app/auth/token.service.js';
import { CallCancellations } from '#app/mcp/call-cancellations.js';
import { WaitService } from '#app/waits/wait.service.js';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk, connectMcp, rawMcp, streamMcp, McpStream } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { Replica, ReplicaSet } from '../support/replicas';
import { startTask, taskResult } from '../support/tasks';
import { createMailbox, createToken, randomSecret, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const LATEST = { 'mcp-protocol-version': '2025-11-25' };
/** How long a cancelled wait may stay parked: the doorbell goes through PostgreSQL and back. */
const FREED_WITHIN_MS = 5000;

const cancellation = (requestId: string | number) => ({
  jsonrpc: '2.0',
  method: 'notifications/cancelled',
  params: { requestId, reason: 'the client gave up' },
});

/** A raw blocking email_await message wait with request id `id`, read as it streams. */
const parkedMessageWait = (url: string, token: string, mailbox: string, id: string | number): Promise<McpStream> =>
  streamMcp(
    url,
    token,
    {
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: {
        name: 'email_await',
        arguments: { event: { type: 'message_received', mailbox_id: mailbox }, timeout_seconds: 120 },
      },
    },
    LATEST,
  );

async function assertEndsWithoutResponse(stream: McpStream, what: string): Promise<void> {
  const ended = await Promise.race([
    stream.done,
    new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), FREED_WITHIN_MS).unref()),
  ]);
  assert.ok(ended, `${what}: the response did not end within ${FREED_WITHIN_MS} ms`);
  assert.deepEqual(
    ended.messages.filter((m: { id?: unknown }) => m.id !== undefined),
    [],
    `${what}: a cancelled request gets no response`,
  );
}

/**
 * docs/operators.md "Limits and hardening": a `notifications/cancelled` for an in-flight blocking
 * call ends that wait on whichever replica holds it, frees its connection, and answers nothing for
 * the cancelled request. Only the token that made a request can cancel it.
 */
describe('cancellation of blocking calls', () => {
  describe('on one replica', () => {
    let server: TestServer;
    let mailbox: string;
    let token: string;
    let agent: Client;
    const inFlight = () => server.running.app.get(CallCancellations, { strict: false }).size;
    const parked = (n: number, kind?: 'message' | 'request') =>
      waitFor(`${n} parked wait(s)`, async () => (await activeWaits(server.url, kind)) === n, {
        timeoutMs: FREED_WITHIN_MS,
      });

    before(async () => {
      server = await startTestServer();
      mailbox = await createMailbox(server.admin);
      token = (await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailbox] }))
        .secret;
      agent = await connectMcp(server.url, token);
    });

    after(async () => {
      await agent?.close();
      await server?.close();
    });

    it("the SDK client's request timeout cancels the wait, which stops at once", async () => {
      const call = agent.callTool(
        {
          name: 'email_await',
          arguments: { event: { type: 'message_received', mailbox_id: mailbox }, timeout_seconds: 120 },
        },
        undefined,
        { timeout: 1500 },
      );
      await assert.rejects(
        call,
        (err: unknown) => err instanceof McpError && err.code === Number(ErrorCode.RequestTimeout),
      );
      await parked(0, 'message');
      await waitFor('no request in flight', () => inFlight() === 0, { timeoutMs: FREED_WITHIN_MS });
    });

    it('aborting a call through its AbortSignal cancels it (monitor_approval)', async () => {
      const request = await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Cancel me' });
      const abort = new AbortController();
      const call = agent.callTool(
        { name: 'monitor_approval', arguments: { request_id: request.request_id, timeout_seconds: 3600 } },
        undefined,
        { signal: abort.signal, timeout: 600_000 },
      );
      await parked(1, 'request');
      abort.abort('not needed any more');
      await assert.rejects(call);
      await parked(0, 'request');
    });

    it('a cancelled tasks/result stops blocking; the task goes on', async () => {
      const task = await startTask(agent, 'monitor_inbox', { mailbox_id: mailbox, timeout_seconds: 120 });
      await assert.rejects(taskResult(agent, task.taskId, { timeout: 1500 }));
      await parked(0, 'message');
      const status = await agent.experimental.tasks.getTask(task.taskId);
      assert.equal(status.status, 'working');
      await agent.experimental.tasks.cancelTask(task.taskId);
    });

    it('a wait whose caller gave up before it was parked ends at once and stays parked nowhere', async () => {
      const caller = await server.running.app.get(TokenService).authenticate(token);
      assert.ok(caller);
      const started = Date.now();
      const result = await server.running.app
        .get(WaitService)
        .await(
          caller,
          { event: { type: 'message_received', mailbox_id: mailbox }, timeout_seconds: 120, delivery: 'poll' },
          AbortSignal.abort(),
        );
      assert.equal(result.matched, false);
      assert.ok(Date.now() - started < 60_000, 'not held until its timeout');
      await parked(0, 'message');
    });

    it('ends the response stream without an answer, and only for the token that made the request', async () => {
      const other = (await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailbox] })).secret;
      const mine = await parkedMessageWait(server.url, token, mailbox, 'wait-1');
      const theirs = await parkedMessageWait(server.url, other, mailbox, 'wait-1');
      await parked(2, 'message');

      const answer = await rawMcp(server.url, other, cancellation('wait-1'), LATEST);
      assert.equal(answer.status, 202);
      await assertEndsWithoutResponse(theirs, "the other token's call");
      // Both cancellations ride the same doorbell channel in order: had it matched, mine would be gone too.
      await parked(1, 'message');

      assert.equal((await rawMcp(server.url, token, cancellation('wait-1'), LATEST)).status, 202);
      await assertEndsWithoutResponse(mine, 'my call');
      await parked(0, 'message');
    });

    it('a numeric id and the same id as a string are different requests', async () => {
      const numeric = await parkedMessageWait(server.url, token, mailbox, 7);
      const text = await parkedMessageWait(server.url, token, mailbox, '7');
      await parked(2, 'message');
      await rawMcp(server.url, token, cancellation('7'), LATEST);
      await assertEndsWithoutResponse(text, 'the string id');
      await parked(1, 'message');
      await rawMcp(server.url, token, cancellation(7), LATEST);
      await assertEndsWithoutResponse(numeric, 'the numeric id');
    });
  });

  describe('across replicas', () => {
    const secret = randomSecret();
    let db: TestDatabase;
    let replicas: ReplicaSet;
    let a: Replica;
    let b: Replica;

    before(async () => {
      db = await createTestDatabase();
      replicas = new ReplicaSet(db.url, secret, { ALCARTA_WAIT_RECHECK_SECONDS: '30' });
      [a, b] = await Promise.all([replicas.start('A'), replicas.start('B')]);
    });

    after(async () => {
      await replicas?.stopAll();
      await db?.drop();
    });

    it('a cancellation sent to replica B ends the call parked on replica A', async () => {
      const mailbox = await createMailbox(a.admin);
      const stream = await parkedMessageWait(a.server.url, secret, mailbox, 'across-1');
      await waitFor('the wait parked on A', async () => (await activeWaits(a.server.url, 'message')) === 1, {
        timeoutMs: FREED_WITHIN_MS,
      });
      const answer = await rawMcp(b.server.url, secret, cancellation('across-1'), LATEST);
      assert.equal(answer.status, 202);
      await assertEndsWithoutResponse(stream, 'the call on A');
      await waitFor('no wait parked on A', async () => (await activeWaits(a.server.url, 'message')) === 0, {
        timeoutMs: FREED_WITHIN_MS,
      });
    });
  });
});
