import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { SignJWT } from 'jose';
import { AT_ONCE_MS, assertEndedAtOnce, assertSocketEnded } from '../support/access-ended';
import { createTestDatabase, TestDatabase } from '../support/database';
import { FakeAuthorizationServer, SigningKey, signingKey } from '../support/fake-authorization-server';
import { callError, callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { ReplicaSet } from '../support/replicas';
import { rejectsWith, startTask, taskContent, taskResult } from '../support/tasks';
import { createMailbox, createToken, ingest, randomSecret, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk, openRefused, socketUrlOn } from '../support/wait-socket';

/** The safety re-check and lapse sweep period of the server here (ALCARTA_WAIT_RECHECK_SECONDS). */
const RECHECK_SECONDS = 1;

interface TokenClaims {
  sub: string;
  groups?: string[];
  scope?: string;
  /** Seconds from now; the token's `iat` is now, or `issuedAgo` seconds before. */
  expiresIn?: number;
  issuedAgo?: number;
  /** Other claims, over the defaults (`undefined` removes one). */
  extra?: Record<string, unknown>;
}

/** Signs an access token of the fake issuer for `audience` (a new `jti` each time: a new token). */
function accessToken(key: SigningKey, issuer: string, audience: string, claims: TokenClaims): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    scope: claims.scope ?? 'mail:read approvals:read',
    client_id: 'agent-client',
    ...(claims.groups && { groups: claims.groups }),
    ...claims.extra,
  })
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setAudience(audience)
    .setSubject(claims.sub)
    .setJti(randomUUID())
    .setIssuedAt(now - (claims.issuedAgo ?? 0))
    .setExpirationTime(now + (claims.expiresIn ?? 300))
    .sign(key.privateKey);
}

/**
 * "Binding" (docs/operators.md, "Identity providers") and docs/operators.md "Limits and hardening"
 * for OAuth principals: waits, websocket tickets and tasks created with a JWT belong to the
 * principal (`iss` + `sub`), so the agent's next access token reaches them and another principal's
 * does not; they outlive the token that created them; and a deleted grant (or a group that leaves
 * the principal's claims) ends, at once, everything the principal held, with reason
 * `access_removed`.
 */
describe('OAuth principals: stored waits, tickets and tasks', () => {
  let server: TestServer;
  const as = new FakeAuthorizationServer();
  let key: SigningKey;
  let audience: string;
  let boxA: string;
  let boxB: string;
  const clients: Client[] = [];

  const token = (claims: TokenClaims) => accessToken(key, as.issuer, audience, claims);
  const agent = async (claims: TokenClaims): Promise<Client> => {
    const client = await connectMcp(server.url, await token(claims));
    clients.push(client);
    return client;
  };
  const grant = async (principal: string, mailboxes: string[]): Promise<string> => {
    const res = await server.admin.post<{ grant_id: string }>('/v1/grants', { principal, mailboxes });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.grant_id;
  };
  const deleteGrant = async (grantId: string): Promise<number> => {
    assert.equal((await server.admin.delete(`/v1/grants/${grantId}`)).status, 204);
    return Date.now();
  };
  const parked = (delivery: 'poll' | 'websocket' | 'persisted', n: number) =>
    waitFor(`${n} parked ${delivery} wait(s)`, async () => (await activeWaits(server.url, 'message', delivery)) === n);
  const waitRow = async (waitId: string) =>
    (
      await server.db.query<{ status: string; result: unknown; token_id: string }>(
        'SELECT status, result, token_id FROM waits WHERE id = $1',
        [waitId],
      )
    )[0];
  const taskRow = async (taskId: string) =>
    (
      await server.db.query<{ status: string; status_message: string | null; wait_id: string }>(
        'SELECT status, status_message, wait_id FROM tasks WHERE id = $1',
        [taskId],
      )
    )[0];

  before(async () => {
    key = await signingKey('binding-key');
    await as.start();
    as.keys = [key];
    server = await startTestServer({
      ownPublicUrl: true,
      env: { ALCARTA_OAUTH_ISSUER: as.issuer, ALCARTA_WAIT_RECHECK_SECONDS: String(RECHECK_SECONDS) },
    });
    audience = `${server.running.url}/mcp`;
    boxA = await createMailbox(server.admin);
    boxB = await createMailbox(server.admin);
  });

  after(async () => {
    for (const client of clients) await client.close();
    await server?.close();
    await as.stop();
  });

  it('a websocket wait of a principal delivers mail of its granted mailbox', async () => {
    await grant('sub:socket-agent', [boxA]);
    const client = await agent({ sub: 'socket-agent' });
    const d = await callOk(client, 'monitor_inbox', { mailbox_id: boxA, timeout_seconds: 60, delivery: 'websocket' });
    assert.match((await waitRow(d.wait_id)).token_id, /^prn_/, 'bound to the principal, not to the token');
    const socket = await openOk(d.websocket_url);
    await parked('websocket', 1);
    await ingest(server.admin, boxA, { subject: 'for the socket' });
    const { code } = await socket.closed;
    assert.equal(code, 1000);
    const result = socket.frames[1] as { type: string; matched: boolean; events: Array<{ subject: string }> };
    assert.equal(result.type, 'result');
    assert.equal(result.matched, true);
    assert.equal(result.events[0].subject, 'for the socket');
  });

  it("the principal's next access token reaches its wait_id and its task; another principal's does not", async () => {
    await grant('sub:refreshing-agent', [boxA]);
    await grant('sub:someone-else', [boxA]);
    const first = await agent({ sub: 'refreshing-agent', issuedAgo: 60 });
    const d = await callOk(first, 'monitor_inbox', { mailbox_id: boxA, timeout_seconds: 60, delivery: 'websocket' });
    const task = await startTask(first, 'monitor_inbox', { mailbox_id: boxA, timeout_seconds: 60 });

    const stranger = await agent({ sub: 'someone-else' });
    assert.equal((await callError(stranger, 'email_await', { wait_id: d.wait_id })).error, 'not_found');
    await rejectsWith(stranger.experimental.tasks.getTask(task.taskId), -32602, 'tasks/get of a stranger');

    const next = await agent({ sub: 'refreshing-agent' });
    assert.equal((await next.experimental.tasks.getTask(task.taskId)).status, 'working');
    const polled = callOk(next, 'email_await', { wait_id: d.wait_id, timeout_seconds: 30 });
    const result = taskResult(next, task.taskId);
    await parked('poll', 2); // the wait_id poll and the blocked tasks/result
    await ingest(server.admin, boxA, { subject: 'after the refresh' });
    const wait = await polled;
    assert.equal(wait.matched, true);
    assert.equal(wait.events[0].subject, 'after the refresh');
    const content = taskContent(await result, task.taskId);
    assert.equal(content.events[0].subject, 'after the refresh');
  });

  it('stored waits outlive the access token that created them; blocking calls end with it', async () => {
    await grant('sub:short-lived', [boxA]);
    // Past its `exp` already, and still accepted within the 60 s clock skew.
    const client = await agent({ sub: 'short-lived', issuedAgo: 600, expiresIn: -10 });
    const d = await callOk(client, 'monitor_inbox', { mailbox_id: boxA, timeout_seconds: 60, delivery: 'websocket' });
    const socket = await openOk(d.websocket_url);
    const blocking = client.callTool({
      name: 'monitor_inbox',
      arguments: { mailbox_id: boxA, timeout_seconds: 60 },
    }) as Promise<CallToolResult>;
    const body = (await blocking).structuredContent as { error: string; reason: string };
    assert.deepEqual({ error: body.error, reason: body.reason }, { error: 'unauthorized', reason: 'token_expired' });

    // A static token's stored wait, for the lapse sweep to end once that token expires: by then the
    // sweep has also seen the principal's wait (whose token expired earlier) and left it alone.
    const staticToken = await createToken(server.admin, {
      scopes: ['mail:read'],
      mailboxes: [boxA],
      expires_at: new Date(Date.now() + 1_500).toISOString(),
    });
    const staticClient = await connectMcp(server.url, staticToken.secret);
    clients.push(staticClient);
    const witness = await callOk(staticClient, 'monitor_inbox', {
      mailbox_id: boxA,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    await waitFor('the lapse sweep ended the static token wait', async () => {
      const row = await waitRow(witness.wait_id);
      return row.status === 'resolved';
    });
    assert.deepEqual((await waitRow(witness.wait_id)).result, { error: 'unauthorized', reason: 'token_expired' });
    assert.equal((await waitRow(d.wait_id)).status, 'pending');
    await ingest(server.admin, boxA, { subject: 'long after the token' });
    const { code } = await socket.closed;
    assert.equal(code, 1000, JSON.stringify(socket.frames));
    assert.equal((socket.frames[1] as { matched: boolean }).matched, true);
  });

  it('deleting a grant ends, within 1 s, the poll wait, socket, wait_id poll, ticket and task of its principal', async () => {
    const removed = await grant('sub:losing-agent', [boxA]);
    await grant('group:keepers', [boxB]);
    await grant('sub:unaffected-agent', [boxA]);
    const client = await agent({ sub: 'losing-agent', groups: ['keepers'] });
    const bystander = await agent({ sub: 'unaffected-agent' });

    const task = await startTask(client, 'monitor_inbox', { mailbox_id: boxA, timeout_seconds: 60 });
    const blockedResult = rejectsWith(taskResult(client, task.taskId), -32602, 'tasks/result');
    const opened = await callOk(client, 'monitor_inbox', {
      mailbox_id: boxA,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    const socket = await openOk(opened.websocket_url);
    const unused = await callOk(client, 'monitor_inbox', {
      mailbox_id: boxA,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    const polled = await callOk(client, 'monitor_inbox', {
      mailbox_id: boxA,
      timeout_seconds: 60,
      delivery: 'websocket',
    });
    const byWaitId = client.callTool({
      name: 'email_await',
      arguments: { wait_id: polled.wait_id, timeout_seconds: 60 },
    }) as Promise<CallToolResult>;
    const blocking = client.callTool({
      name: 'monitor_inbox',
      arguments: { mailbox_id: boxA, timeout_seconds: 60 },
    }) as Promise<CallToolResult>;
    const bystanderSocket = await openOk(
      (await callOk(bystander, 'monitor_inbox', { mailbox_id: boxA, timeout_seconds: 60, delivery: 'websocket' }))
        .websocket_url,
    );
    await parked('poll', 3); // tasks/result, the wait_id poll, the blocking call
    await parked('websocket', 2);

    const deletedAt = await deleteGrant(removed);
    const { status, status_message: message, wait_id: taskWait } = await taskRow(task.taskId);
    assert.equal(status, 'cancelled', 'cancelled in the deleting transaction');
    assert.equal(message, 'The task was cancelled: access to a mailbox was removed (a grant was deleted).');
    await assertEndedAtOnce(blocking, deletedAt, 'access_removed');
    await assertEndedAtOnce(byWaitId, deletedAt, 'access_removed');
    await assertSocketEnded(socket, opened.wait_id, 'access_removed');
    const data = await blockedResult;
    assert.deepEqual([data.error, data.reason], ['unauthorized', 'access_removed']);
    const elapsed = Date.now() - deletedAt;
    assert.ok(elapsed <= AT_ONCE_MS, `all ended ${elapsed} ms after the deletion`);
    for (const waitId of [taskWait, opened.wait_id, unused.wait_id, polled.wait_id]) {
      assert.deepEqual((await waitRow(waitId)).result, { error: 'unauthorized', reason: 'access_removed' }, waitId);
    }
    const refused = await openRefused(unused.websocket_url);
    assert.deepEqual([refused.status, refused.body.reason], [401, 'ticket_invalid']);

    // Mail that arrives afterwards reaches the bystander (same mailbox, own grant) and nobody else.
    await ingest(server.admin, boxA, { subject: 'after the grant went' });
    assert.equal((await bystanderSocket.closed).code, 1000);
    assert.equal((await taskRow(task.taskId)).status, 'cancelled');
    assert.equal(await activeWaits(server.url, 'message', 'persisted'), 0, 'nobody watches the ended waits');

    // The principal keeps what its group still gives, at once: a new wait is not taken for revoked.
    const again = callOk(client, 'monitor_inbox', { mailbox_id: boxB, timeout_seconds: 30 });
    await parked('poll', 1);
    await ingest(server.admin, boxB, { subject: 'still reachable' });
    assert.equal((await again).matched, true);
    assert.equal((await callError(client, 'list_messages', { mailbox_id: boxA })).error, 'not_found');
  });

  it('an Okta-style token names its client in cid: a client: grant reaches it', async () => {
    await grant('client:okta-agent', [boxB]);
    const client = await agent({ sub: 'okta-subject', extra: { client_id: undefined, cid: 'okta-agent' } });
    const listed = await callOk<{ mailboxes: Array<{ mailbox_id: string }> }>(client, 'list_mailboxes');
    assert.deepEqual(
      listed.mailboxes.map((m) => m.mailbox_id),
      [boxB],
    );
    const [row] = await server.db.query<{ client_id: string }>(
      `SELECT client_id FROM principals WHERE subject = 'okta-subject'`,
    );
    assert.equal(row.client_id, 'okta-agent');
  });

  it('a grant deleted without a doorbell ends the blocking wait at the next safety re-check', async () => {
    const grantId = await grant('sub:quiet-loser', [boxA]);
    const client = await agent({ sub: 'quiet-loser' });
    const blocking = client.callTool({
      name: 'monitor_inbox',
      arguments: { mailbox_id: boxA, timeout_seconds: 60 },
    }) as Promise<CallToolResult>;
    await parked('poll', 1);
    // Straight in the database: no transaction of Alcarta's, so no doorbell rings.
    await server.db.query('DELETE FROM grants WHERE id = $1', [grantId]);
    const deletedAt = Date.now();
    const body = (await blocking).structuredContent as { error: string; reason: string };
    assert.deepEqual([body.error, body.reason], ['unauthorized', 'access_removed']);
    const elapsed = Date.now() - deletedAt;
    assert.ok(elapsed <= RECHECK_SECONDS * 1000 + AT_ONCE_MS, `ended ${elapsed} ms after the deletion`);
  });

  it('a group that leaves a newer token ends the stored waits it gave, at once; an older token cannot bring it back', async () => {
    await grant('group:rotating', [boxB]);
    const member = await agent({ sub: 'group-leaver', groups: ['rotating'], issuedAgo: 120 });
    const d = await callOk(member, 'monitor_inbox', { mailbox_id: boxB, timeout_seconds: 60, delivery: 'websocket' });
    const socket = await openOk(d.websocket_url);
    await parked('websocket', 1);

    const stored = async () =>
      (await server.db.query<{ groups: string[] }>(`SELECT groups FROM principals WHERE subject = 'group-leaver'`))[0]
        .groups;
    assert.deepEqual(await stored(), ['rotating']);
    const left = await agent({ sub: 'group-leaver', groups: [] });
    const leftAt = Date.now();
    await left.listTools();
    await assertSocketEnded(socket, d.wait_id, 'access_removed');
    assert.ok(Date.now() - leftAt <= AT_ONCE_MS + 1_000);
    assert.deepEqual(await stored(), []);

    // The older token is still valid, but its claims are not newer than the stored ones.
    await agent({ sub: 'group-leaver', groups: ['rotating'], issuedAgo: 60 });
    assert.deepEqual(await stored(), [], 'the principal keeps the claims of its newest token');
  });
});

/**
 * A grant deleted through one replica ends, within a second, the poll wait and the socket of its
 * principal parked on another (the doorbell; the safety re-check is at its longest, 30 s).
 */
describe('grant deletion across replicas', () => {
  const secret = randomSecret();
  const as = new FakeAuthorizationServer();
  let key: SigningKey;
  let db: TestDatabase;
  let replicas: ReplicaSet;
  const audience = 'https://alcarta.example/mcp';

  before(async () => {
    key = await signingKey('replica-key');
    await as.start();
    as.keys = [key];
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, secret, {
      ALCARTA_WAIT_RECHECK_SECONDS: '30',
      ALCARTA_OAUTH_ISSUER: as.issuer,
      ALCARTA_OAUTH_AUDIENCE: audience,
    });
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
    await as.stop();
  });

  it('deleted on replica A: the poll wait and the socket parked on replica B end within 1 s', async () => {
    const a = await replicas.start('A'); // alone first: it runs the migrations
    const b = await replicas.start('B');
    const mailboxId = await createMailbox(a.admin);
    const created = await a.admin.post<{ grant_id: string }>('/v1/grants', {
      principal: 'sub:replica-agent',
      mailboxes: [mailboxId],
    });
    const agentClient = await connectMcp(
      b.server.url,
      await accessToken(key, as.issuer, audience, { sub: 'replica-agent' }),
    );
    try {
      const d = await callOk(agentClient, 'monitor_inbox', {
        mailbox_id: mailboxId,
        timeout_seconds: 60,
        delivery: 'websocket',
      });
      const socket = await openOk(socketUrlOn(b.server.url, d.websocket_url));
      const pending = agentClient.callTool({
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

      assert.equal((await a.admin.delete(`/v1/grants/${created.body.grant_id}`)).status, 204);
      const deletedAt = Date.now();
      await assertEndedAtOnce(pending, deletedAt, 'access_removed');
      await assertSocketEnded(socket, d.wait_id, 'access_removed');
      const elapsed = Date.now() - deletedAt;
      assert.ok(elapsed <= AT_ONCE_MS, `replica B ended them ${elapsed} ms after the deletion on A`);
    } finally {
      await agentClient.close();
    }
  });
});
