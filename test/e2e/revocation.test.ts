import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { runCli } from '../support/cli';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { Replica, ReplicaSet } from '../support/replicas';
import { rejectsWith, startTask, taskResult } from '../support/tasks';
import { createMailbox, createToken, ingest, randomSecret, startTestServer, TestServer } from '../support/test-server';
import { AT_ONCE_MS, assertEndedAtOnce, assertSocketEnded, toolError } from '../support/access-ended';
import { waitFor } from '../support/wait-for';
import { openOk, openRefused, socketUrlOn } from '../support/wait-socket';

/** The safety re-check period of the servers here (ALCARTA_WAIT_RECHECK_SECONDS); expiry ends within it. */
const RECHECK_SECONDS = 1;

type Agent = { id: string; secret: string; client: Client };

/**
 * "Revocation and expiry end access at once, everywhere" (docs/operators.md, "Limits and
 * hardening"), through the official SDK client and a real `ws` client: a revoked token's parked
 * poll wait, `wait_id` poll, open socket, unused websocket URL, working task and blocked
 * tasks/result end within a second (on every replica, and also when the CLI revokes), and nothing
 * that arrives afterwards is delivered; a token whose `expires_at` passes loses all of them too,
 * its parked waits at the moment it expires.
 */
describe('revocation and expiry end what a token holds', () => {
  let server: TestServer;
  let mailboxId: string;
  /** A token that is never revoked, whose waits show when the server has processed a message. */
  let witness: Client;
  const agents: Agent[] = [];

  const newAgent = async (expiresAt?: Date): Promise<Agent> => {
    const token = await createToken(server.admin, {
      scopes: ['mail:read'],
      mailboxes: [mailboxId],
      ...(expiresAt && { expires_at: expiresAt.toISOString() }),
    });
    const agent = { ...token, client: await connectMcp(server.url, token.secret) };
    agents.push(agent);
    return agent;
  };

  /** Revokes through the REST API; returns when the 204 arrived. */
  const revoke = async (tokenId: string): Promise<number> => {
    const res = await server.admin.delete(`/v1/tokens/${tokenId}`);
    assert.equal(res.status, 204);
    return Date.now();
  };

  const parked = (delivery: 'poll' | 'websocket' | 'persisted', n: number) =>
    waitFor(`${n} parked ${delivery} wait(s)`, async () => (await activeWaits(server.url, 'message', delivery)) === n);

  const waitRow = async (waitId: string) =>
    (
      await server.db.query<{ status: string; result: unknown; ticket_consumed_at: Date | null }>(
        'SELECT status, result, ticket_consumed_at FROM waits WHERE id = $1',
        [waitId],
      )
    )[0];

  const taskRow = async (taskId: string) =>
    (
      await server.db.query<{ status: string; status_message: string | null; result: unknown; wait_id: string }>(
        'SELECT status, status_message, result, wait_id FROM tasks WHERE id = $1',
        [taskId],
      )
    )[0];

  /**
   * Ingests a message once the witness waits for it, and returns when the witness got it: by then
   * this server has processed the message's doorbell, so anything it would deliver is delivered.
   */
  const ingestSeen = async (subject: string): Promise<void> => {
    const seen = callOk(witness, 'monitor_inbox', {
      mailbox_id: mailboxId,
      subject_contains: subject,
      timeout_seconds: 30,
    });
    await waitFor('the witness wait', async () => (await activeWaits(server.url, 'message', 'poll')) >= 1);
    await ingest(server.admin, mailboxId, { subject });
    assert.equal((await seen).matched, true);
  };

  before(async () => {
    server = await startTestServer({
      ownPublicUrl: true,
      env: { ALCARTA_WAIT_RECHECK_SECONDS: String(RECHECK_SECONDS) },
    });
    mailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    witness = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    for (const agent of agents) await agent.client.close();
    await witness?.close();
    await server?.close();
  });

  it('a parked poll wait returns the unauthorized tool error token_revoked within 1 s', async () => {
    const agent = await newAgent();
    const pending = agent.client.callTool({
      name: 'monitor_inbox',
      arguments: { mailbox_id: mailboxId, timeout_seconds: 60 },
    }) as Promise<CallToolResult>;
    await parked('poll', 1);
    const revokedAt = await revoke(agent.id);
    await assertEndedAtOnce(pending, revokedAt, 'token_revoked');
    await parked('poll', 0);
  });

  it('an open websocket gets the error frame and close 1008 within 1 s; later mail is delivered to nobody', async () => {
    const agent = await newAgent();
    const d = await callOk(agent.client, 'monitor_inbox', {
      mailbox_id: mailboxId,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    const socket = await openOk(d.websocket_url);
    await parked('websocket', 1);
    const revokedAt = await revoke(agent.id);
    await assertSocketEnded(socket, d.wait_id, 'token_revoked');
    const elapsed = Date.now() - revokedAt;
    assert.ok(elapsed <= AT_ONCE_MS, `closed ${elapsed} ms after the revocation`);

    await ingestSeen('after the revocation');
    assert.deepEqual((await waitRow(d.wait_id)).result, { error: 'unauthorized', reason: 'token_revoked' });
    assert.equal(await activeWaits(server.url, 'message', 'persisted'), 0, 'no replica watches the wait');
  });

  it('a wait_id poll returns the unauthorized tool error within 1 s', async () => {
    const agent = await newAgent();
    const d = await callOk(agent.client, 'monitor_inbox', {
      mailbox_id: mailboxId,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    const pending = agent.client.callTool({
      name: 'email_await',
      arguments: { wait_id: d.wait_id, timeout_seconds: 60 },
    }) as Promise<CallToolResult>;
    await parked('poll', 1);
    const revokedAt = await revoke(agent.id);
    await assertEndedAtOnce(pending, revokedAt, 'token_revoked');
  });

  it('an unused websocket URL becomes 401 ticket_invalid and stays unused; later mail is delivered to nobody', async () => {
    const agent = await newAgent();
    const d = await callOk(agent.client, 'monitor_inbox', {
      mailbox_id: mailboxId,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    await parked('persisted', 1);
    await revoke(agent.id);
    const refused = await openRefused(d.websocket_url);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.error, 'invalid_request');
    assert.equal(refused.body.reason, 'ticket_invalid');
    assert.equal((await waitRow(d.wait_id)).ticket_consumed_at, null, 'the ticket was not consumed');
    await parked('persisted', 0);

    await ingestSeen('for a revoked wait');
    const row = await waitRow(d.wait_id);
    assert.equal(row.status, 'resolved');
    assert.deepEqual(row.result, { error: 'unauthorized', reason: 'token_revoked' }, 'not the message');
    assert.equal((await openRefused(d.websocket_url)).status, 401, 'still refused');
  });

  it('a working task is cancelled by the revocation, and a blocked tasks/result ends within 1 s', async () => {
    const agent = await newAgent();
    const task = await startTask(agent.client, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 60 });
    const blocked = rejectsWith(taskResult(agent.client, task.taskId), -32602, 'tasks/result');
    await parked('poll', 1); // the blocked tasks/result
    const revokedAt = await revoke(agent.id);
    const { status, status_message: message, wait_id: waitId } = await taskRow(task.taskId);
    assert.equal(status, 'cancelled', 'cancelled in the revoking transaction');
    assert.equal(message, 'The task was cancelled: its token was revoked.');
    assert.deepEqual((await waitRow(waitId)).result, { error: 'unauthorized', reason: 'token_revoked' });
    const data = await blocked;
    const elapsed = Date.now() - revokedAt;
    assert.equal(data.error, 'unauthorized');
    assert.equal(data.reason, 'token_revoked');
    assert.ok(elapsed <= AT_ONCE_MS, `tasks/result ended ${elapsed} ms after the revocation`);

    await ingestSeen('for a cancelled task');
    const after = await taskRow(task.taskId);
    assert.equal(after.status, 'cancelled');
    assert.equal(after.result, null, 'no result was stored');
  });

  it('revoking with the CLI ends a parked wait within 1 s and cancels a working task at once', async () => {
    const agent = await newAgent();
    const task = await startTask(agent.client, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 60 });
    const pending = agent.client.callTool({
      name: 'monitor_inbox',
      arguments: { mailbox_id: mailboxId, timeout_seconds: 60 },
    }) as Promise<CallToolResult>;
    await parked('poll', 1);
    const cli = await runCli(server.db.url, 'tokens', 'revoke', agent.id);
    const revokedAt = Date.now();
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal((await taskRow(task.taskId)).status, 'cancelled');
    assert.equal(toolError(await pending).reason, 'token_revoked');
    const elapsed = Date.now() - revokedAt;
    assert.ok(elapsed <= AT_ONCE_MS, `ended ${elapsed} ms after the CLI finished`);
  });

  it('when expires_at passes: the poll wait and the socket end then (token_expired), the task within the re-check period', async () => {
    const expiresAt = new Date(Date.now() + 4_000);
    const agent = await newAgent(expiresAt);
    const task = await startTask(agent.client, 'monitor_inbox', { mailbox_id: mailboxId, timeout_seconds: 60 });
    const d = await callOk(agent.client, 'monitor_inbox', {
      mailbox_id: mailboxId,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    const socket = await openOk(d.websocket_url);
    const unused = await callOk(agent.client, 'monitor_inbox', {
      mailbox_id: mailboxId,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    const pending = agent.client.callTool({
      name: 'monitor_inbox',
      arguments: { mailbox_id: mailboxId, timeout_seconds: 60 },
    }) as Promise<CallToolResult>;
    await parked('poll', 1);
    await parked('websocket', 1);
    assert.ok(Date.now() < expiresAt.getTime() - 500, 'the set-up took too long to see the expiry happen');

    const body = toolError(await pending);
    const endedAt = Date.now();
    assert.deepEqual({ error: body.error, reason: body.reason }, { error: 'unauthorized', reason: 'token_expired' });
    assert.ok(endedAt >= expiresAt.getTime() - 50, `the poll wait ended ${expiresAt.getTime() - endedAt} ms early`);
    assert.ok(endedAt - expiresAt.getTime() <= AT_ONCE_MS, `ended ${endedAt - expiresAt.getTime()} ms after expiry`);
    await assertSocketEnded(socket, d.wait_id, 'token_expired');

    // Stored waits and tasks are ended by the sweep, every ALCARTA_WAIT_RECHECK_SECONDS.
    const bound = RECHECK_SECONDS * 1000 + AT_ONCE_MS;
    const cancelled = await waitFor(
      'the task cancelled',
      async () => (await taskRow(task.taskId)).status === 'cancelled',
      {
        timeoutMs: bound + 5_000,
      },
    );
    assert.ok(cancelled);
    const lag = Date.now() - expiresAt.getTime();
    assert.ok(lag <= bound, `the task was cancelled ${lag} ms after expiry`);
    const row = await taskRow(task.taskId);
    assert.equal(row.status_message, 'The task was cancelled: its token expired.');
    assert.deepEqual((await waitRow(row.wait_id)).result, { error: 'unauthorized', reason: 'token_expired' });
    assert.deepEqual((await waitRow(unused.wait_id)).result, { error: 'unauthorized', reason: 'token_expired' });
    const refused = await openRefused(unused.websocket_url);
    assert.deepEqual([refused.status, refused.body.reason], [401, 'ticket_invalid']);
    await parked('persisted', 0);
  });
});

/**
 * The same across server processes on one database: the revocation is made on one replica and
 * ends, within a second, the poll wait and the socket parked on another (the doorbell, not the
 * safety re-check, which is set to its longest, 30 s).
 */
describe('revocation across replicas', () => {
  const secret = randomSecret();
  let db: TestDatabase;
  let replicas: ReplicaSet;
  let a: Replica;
  let b: Replica;

  before(async () => {
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, secret, { ALCARTA_WAIT_RECHECK_SECONDS: '30' });
    a = await replicas.start('A'); // alone first: it runs the migrations
    b = await replicas.start('B');
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
  });

  it('revoked on replica A: the poll wait and the socket parked on replica B end within 1 s', async () => {
    const mailboxId = await createMailbox(a.admin);
    const token = await createToken(a.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const agent = await connectMcp(b.server.url, token.secret);
    try {
      const d = await callOk(agent, 'monitor_inbox', {
        mailbox_id: mailboxId,
        timeout_seconds: 60,
        delivery: 'websocket',
      });
      const socket = await openOk(socketUrlOn(b.server.url, d.websocket_url));
      const pending = agent.callTool({
        name: 'monitor_inbox',
        arguments: { mailbox_id: mailboxId, timeout_seconds: 60 },
      }) as Promise<CallToolResult>;
      await waitFor('the waits parked on B', async () => {
        const [polls, sockets] = await Promise.all([
          activeWaits(b.server.url, 'message', 'poll'),
          activeWaits(b.server.url, 'message', 'websocket'),
        ]);
        return polls === 1 && sockets === 1;
      });

      const res = await a.admin.delete(`/v1/tokens/${token.id}`);
      assert.equal(res.status, 204);
      const revokedAt = Date.now();
      assert.equal(toolError(await pending).reason, 'token_revoked');
      await assertSocketEnded(socket, d.wait_id, 'token_revoked');
      const elapsed = Date.now() - revokedAt;
      assert.ok(elapsed <= AT_ONCE_MS, `replica B ended them ${elapsed} ms after the revocation on A`);
      for (const r of [a, b]) assert.equal(await activeWaits(r.server.url, 'message', 'persisted'), 0, r.name);
    } finally {
      await agent.close();
    }
  });
});
