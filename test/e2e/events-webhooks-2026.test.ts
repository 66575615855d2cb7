import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { secretsKey } from '../support/connected-mailboxes';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk2026, connectMcp2026 } from '../support/mcp-2026';
import { RestClient } from '../support/rest';
import { spawnServer, SpawnedServer } from '../support/spawned-server';
import { createMailbox, createToken, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { echoChallenge, ReceivedWebhook, WebhookReceiver } from '../support/webhook-receiver';

const EVENTS = 'io.modelcontextprotocol/events';
const DECLARES_EVENTS = { extensions: { [EVENTS]: {} } };
const anyResult = z.looseObject({});

interface SubscribeResult {
  id: string;
  refreshBefore: string | null;
  cursor: string;
  truncated: boolean;
  deliveryStatus?: { active: boolean; lastDeliveryAt: string | null; lastError: string | null; failedSince?: string };
}

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/**
 * docs/agents.md "Webhook delivery": the Events extension's events/subscribe and
 * events/unsubscribe at 2026-07-28, through the official v2 client, delivered by the webhook engine
 * of two real server processes to a real HTTPS receiver (a throwaway CA the servers trust through
 * NODE_EXTRA_CA_CERTS) that verifies every POST with the `standardwebhooks` library: the
 * verification handshake, occurrences with their eventId and a cursor that resumes events/poll
 * exactly, refresh, secret replacement, retries with a cursor that never passes an unacknowledged
 * occurrence, a replica killed, access revoked (a `terminated` envelope), and every refusal.
 */
describe('Events extension webhook delivery at 2026-07-28', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  const servers: SpawnedServer[] = [];
  let admin: RestClient;
  let mailbox: string;
  let otherMailbox: string;
  let token: { id: string; secret: string };
  let agent: Client;
  let paths = 0;
  const adminSecret = randomSecret();
  // Every replica opens the secrets the others sealed.
  const secretsKeyOfAll = secretsKey();

  const start = async () => {
    const server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_BOOTSTRAP_TOKEN: adminSecret,
      ALCARTA_SECRETS_KEY: secretsKeyOfAll,
      ALCARTA_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      ALCARTA_WEBHOOK_RETRY_BASE_SECONDS: '1',
      NODE_EXTRA_CA_CERTS: receiver.caFile,
    });
    servers.push(server);
    return server;
  };
  const subscribe = (client: Client, params: Record<string, unknown>) =>
    client.request({ method: 'events/subscribe', params }, anyResult) as Promise<unknown> as Promise<SubscribeResult>;
  const poll = (client: Client, params: Record<string, unknown>) =>
    client.request({ method: 'events/poll', params }, anyResult) as Promise<unknown> as Promise<{
      events: Array<{ eventId: string; data: Record<string, any> }>;
      cursor: string;
    }>;
  const refusal = async (promise: Promise<unknown>) =>
    promise.then(
      () => assert.fail('expected a JSON-RPC error'),
      (e: unknown) => e as { code: number; message: string; data?: any },
    );
  /** A fresh receiver path expecting POSTs signed with `secrets`. */
  const hookPath = (...secrets: string[]) => {
    const path = `/sub-${++paths}`;
    receiver.expectSecrets(path, ...secrets);
    return path;
  };
  const occurrences = (path: string) => receiver.to(path).filter((h) => h.body.type === undefined);
  const verifications = (path: string) => receiver.to(path).filter((h) => h.body.type === 'verification');

  before(async () => {
    db = await createTestDatabase();
    receiver = await WebhookReceiver.startHttps();
    const first = await start();
    admin = new RestClient(first.url, adminSecret);
    mailbox = await createMailbox(admin);
    otherMailbox = await createMailbox(admin);
    token = await createToken(admin, {
      scopes: ['mail:read', 'mail:send', 'approvals:read'],
      mailboxes: [mailbox],
    });
    agent = await connectMcp2026(first.url, token.secret, { capabilities: DECLARES_EVENTS });
    await start();
  });

  after(async () => {
    await agent?.close();
    await Promise.all(servers.map((s) => s.stop()));
    await receiver?.close();
    await db?.drop();
  });

  it('verifies the URL once, then POSTs each new mail signed with the client secret, with a cursor that resumes events/poll exactly', async () => {
    const secret = newSecret();
    const path = hookPath(secret);
    const url = receiver.url(path);
    const listed = (await agent.request({ method: 'events/list', params: {} }, anyResult)) as unknown as {
      events: Array<{ name: string; delivery: string[] }>;
    };
    assert.deepEqual(listed.events.find((e) => e.name === 'email.received')?.delivery, ['poll', 'webhook']);

    const before = Date.now();
    const sub = await subscribe(agent, {
      name: 'email.received',
      arguments: { mailbox_id: mailbox },
      delivery: { mode: 'webhook', url, secret },
      cursor: null,
    });
    assert.match(sub.id, /^sub_[0-9a-f]{24}$/);
    assert.equal(sub.truncated, false);
    const granted = Date.parse(sub.refreshBefore!) - before;
    assert.ok(granted > 3_500_000 && granted <= 3_600_000 + 5_000, `default TTL of an hour, got ${granted} ms`);
    const [challenge] = verifications(path);
    assert.equal(challenge.headers['x-mcp-subscription-id'], sub.id);
    assert.match(challenge.id, /^msg_verification_/);

    const first = await ingest(admin, mailbox, { subject: 'first' });
    // Mail of another mailbox is not for this subscription (and not the token's).
    await ingest(admin, otherMailbox, { subject: 'elsewhere' });
    const second = await ingest(admin, mailbox, { subject: 'second' });
    const got = await waitFor('two occurrences', () => {
      const hooks = occurrences(path);
      return new Set(hooks.map((h) => h.id)).size >= 2 ? hooks : undefined;
    });
    assert.deepEqual([...new Set(got.map((h) => h.id))].sort(), [first, second].sort());
    for (const hook of got) {
      assert.equal(hook.headers['x-mcp-subscription-id'], sub.id);
      assert.equal(hook.body.eventId, hook.id);
      assert.equal(hook.body.name, 'email.received');
      assert.equal(hook.body.data.message_id, hook.id);
      assert.equal(hook.body.data.mailbox_id, mailbox);
      assert.equal(hook.body.timestamp, hook.body.data.received_at);
      assert.equal(typeof hook.body.cursor, 'string');
    }
    assert.deepEqual(got.map((h) => h.body.data.subject).sort(), ['first', 'second'], 'nothing of the other mailbox');
    // Each cursor is safe to persist: events/poll from it skips nothing that follows it (it may repeat
    // what was still unacknowledged when it was sent: occurrences are retried on their own).
    const third = await ingest(admin, mailbox, { subject: 'third' });
    const thirdHook = await waitFor('third', () => occurrences(path).find((h) => h.id === third));
    const all = [first, second, third];
    for (const hook of [...got, thirdHook]) {
      const from = await poll(agent, {
        name: 'email.received',
        arguments: { mailbox_id: mailbox },
        cursor: hook.body.cursor,
      });
      const ids = from.events.map((e) => e.eventId);
      assert.deepEqual(ids, all.slice(all.length - ids.length), `from ${hook.body.data.subject}: a suffix`);
      assert.ok(ids.length >= all.length - all.indexOf(hook.id) - 1, `from ${hook.body.data.subject}: all after it`);
    }
    // Once every one is acknowledged, the subscription's cursor is past them all.
    await waitFor('every occurrence acknowledged', async () => {
      const [{ pending }] = await db.query<{ pending: number }>(
        `SELECT count(*)::int AS pending FROM webhook_deliveries WHERE endpoint_id = $1 AND status <> 'delivered'`,
        [sub.id],
      );
      return pending === 0;
    });
    // Subscribing again with the same key refreshes it: same id, no new verification, status reported.
    const refreshed = await subscribe(agent, {
      name: 'email.received',
      arguments: { mailbox_id: mailbox },
      delivery: { mode: 'webhook', url, secret },
      cursor: sub.cursor,
      ttlMs: 120_000,
    });
    assert.equal(refreshed.id, sub.id);
    assert.equal(verifications(path).length, 1);
    // The refresh's cursor is past everything acknowledged: nothing follows it.
    assert.deepEqual(
      (await poll(agent, { name: 'email.received', arguments: { mailbox_id: mailbox }, cursor: refreshed.cursor }))
        .events,
      [],
    );
    assert.equal(refreshed.deliveryStatus?.active, true);
    assert.equal(refreshed.deliveryStatus?.lastError, null);
    assert.ok(refreshed.deliveryStatus?.lastDeliveryAt);
    const regranted = Date.parse(refreshed.refreshBefore!) - Date.now();
    assert.ok(regranted > 100_000 && regranted <= 120_000, `${regranted} ms`);

    // Unsubscribed (an empty result): nothing more arrives; a second unsubscribe finds nothing.
    const { _meta: _serverMeta, ...unsubscribed } = (await agent.request(
      {
        method: 'events/unsubscribe',
        params: { name: 'email.received', arguments: { mailbox_id: mailbox }, delivery: { url } },
      },
      anyResult,
    )) as Record<string, unknown>;
    assert.deepEqual(unsubscribed, {});
    const gone = await refusal(
      agent.request(
        {
          method: 'events/unsubscribe',
          params: { name: 'email.received', arguments: { mailbox_id: mailbox }, delivery: { url } },
        },
        anyResult,
      ),
    );
    assert.equal(gone.code, -32011);
    assert.equal(gone.data?.kind, 'subscription');
    const fourth = await ingest(admin, mailbox, { subject: 'after unsubscribe' });
    // The next subscription's first occurrence proves the feeder ran after the fourth mail.
    const laterPath = hookPath(secret);
    await subscribe(agent, {
      name: 'email.received',
      arguments: { mailbox_id: mailbox, subject_contains: 'fifth' },
      delivery: { url: receiver.url(laterPath), secret },
      cursor: null,
    });
    await ingest(admin, mailbox, { subject: 'fifth' });
    await waitFor('the fifth mail elsewhere', () => occurrences(laterPath).length === 1);
    assert.ok(!occurrences(path).some((h) => h.id === fourth), 'nothing after unsubscribe');
  });

  it('retries an occurrence with the same webhook-id, and no cursor passes it until it is acknowledged', async () => {
    const secret = newSecret();
    const path = hookPath(secret);
    let refuseFirst = true;
    receiver.answer = (hook) => {
      if (hook.path === path && hook.body.data?.subject === 'refused at first' && refuseFirst) return 503;
      return echoChallenge(hook);
    };
    try {
      const sub = await subscribe(agent, {
        name: 'email.received',
        arguments: { mailbox_id: mailbox },
        delivery: { url: receiver.url(path), secret },
        cursor: null,
      });
      const refused = await ingest(admin, mailbox, { subject: 'refused at first' });
      await waitFor('the first refusal', () => occurrences(path).some((h) => h.id === refused && h.answered === 503));
      const later = await ingest(admin, mailbox, { subject: 'accepted' });
      const laterHook = await waitFor('the later one', () => occurrences(path).find((h) => h.id === later));
      // The later one was acknowledged while the first is unacknowledged: its cursor stays before the first.
      assert.equal(laterHook.body.cursor, sub.cursor);
      const replay = await poll(agent, {
        name: 'email.received',
        arguments: { mailbox_id: mailbox },
        cursor: laterHook.body.cursor,
      });
      assert.deepEqual(
        replay.events.map((e) => e.eventId),
        [refused, later],
      );
      // A refresh meanwhile reports the safe cursor too.
      const status = await subscribe(agent, {
        name: 'email.received',
        arguments: { mailbox_id: mailbox },
        delivery: { url: receiver.url(path), secret },
        cursor: laterHook.body.cursor,
      });
      assert.equal(status.cursor, sub.cursor);
      refuseFirst = false;
      const retried = await waitFor(
        'the retry',
        () => occurrences(path).find((h) => h.id === refused && h.answered === 204),
        {
          timeoutMs: 20_000,
        },
      );
      assert.equal(retried.headers['x-mcp-subscription-id'], sub.id);
      const after = await poll(agent, {
        name: 'email.received',
        arguments: { mailbox_id: mailbox },
        cursor: retried.body.cursor,
      });
      assert.deepEqual(
        after.events.map((e) => e.eventId),
        [later],
        'acknowledged: the cursor moved past the retried one, not past what followed in another page',
      );
    } finally {
      receiver.answer = echoChallenge;
    }
  });

  it('signs with the replaced secret too for a while, after a refresh with a new one', async () => {
    const oldSecret = newSecret();
    const newer = newSecret();
    const path = hookPath(oldSecret);
    const params = { name: 'email.received', arguments: { mailbox_id: mailbox, subject_contains: 'rotation' } };
    await subscribe(agent, { ...params, delivery: { url: receiver.url(path), secret: oldSecret }, cursor: null });
    receiver.expectSecrets(path, oldSecret, newer);
    await subscribe(agent, { ...params, delivery: { url: receiver.url(path), secret: newer }, cursor: null });
    const id = await ingest(admin, mailbox, { subject: 'rotation' });
    const hook = await waitFor('a delivery under both secrets', () => occurrences(path).find((h) => h.id === id));
    assert.equal(hook.signature.split(' ').length, 2);
  });

  it('delivers approval.decided and approval.requested for the subscribed requests only', async () => {
    const secret = newSecret();
    const decidedPath = hookPath(secret);
    const requestedPath = hookPath(secret);
    const watched = await callOk2026(agent, 'request_approval', { mailbox_id: mailbox, title: 'Watched' });
    const other = await callOk2026(agent, 'request_approval', { mailbox_id: mailbox, title: 'Other' });
    await subscribe(agent, {
      name: 'approval.decided',
      arguments: { request_ids: [watched.request_id] },
      delivery: { url: receiver.url(decidedPath), secret },
      cursor: null,
    });
    await subscribe(agent, {
      name: 'approval.requested',
      arguments: { mailbox_id: mailbox },
      delivery: { url: receiver.url(requestedPath), secret },
      cursor: null,
    });
    assert.equal((await admin.post(`/v1/requests/${other.request_id}/reject`, {})).status, 200);
    assert.equal((await admin.post(`/v1/requests/${watched.request_id}/approve`, {})).status, 200);
    const decided = await waitFor('the decision', () => occurrences(decidedPath)[0]);
    assert.equal(decided.body.name, 'approval.decided');
    assert.equal(decided.id, watched.request_id);
    assert.deepEqual(
      { ...decided.body.data, changed_at: undefined },
      {
        request_id: watched.request_id,
        mailbox_id: mailbox,
        state: 'approved',
        previous_state: 'pending',
        changed_at: undefined,
      },
    );
    const third = await callOk2026(agent, 'request_approval', { mailbox_id: mailbox, title: 'Announced' });
    const requested = await waitFor('the new request', () =>
      occurrences(requestedPath).find((h) => h.id === third.request_id),
    );
    assert.equal(requested.body.data.title, 'Announced');
    // Starting "now" starts at the feed's horizon: nothing committed later is missed, and a request
    // committed moments before, while another transaction was still running, may come too.
    assert.deepEqual(
      occurrences(requestedPath).filter(
        (h) => ![watched.request_id, other.request_id, third.request_id].includes(h.id),
      ),
      [],
    );
    assert.equal(occurrences(decidedPath).length, 1, 'only the watched request');
  });

  it('refuses what cannot be right, and a URL that does not confirm, with the extension codes', async () => {
    const secret = newSecret();
    const valid = { name: 'email.received', arguments: {}, cursor: null };
    const cases: Array<[string, Record<string, unknown>, number, Record<string, unknown>?]> = [
      ['http URL', { ...valid, delivery: { url: receiver.url('/x').replace('https:', 'http:'), secret } }, -32602],
      ['ftp URL', { ...valid, delivery: { url: 'ftp://127.0.0.1/x', secret } }, -32602],
      ['metadata address', { ...valid, delivery: { url: 'https://169.254.169.254/latest', secret } }, -32602],
      ['IPv6 loopback', { ...valid, delivery: { url: 'https://[::1]:9/x', secret } }, -32602],
      ['IPv4-mapped loopback', { ...valid, delivery: { url: 'https://[::ffff:7f00:2]:9/x', secret } }, -32602],
      [
        'short secret',
        { ...valid, delivery: { url: receiver.url('/x'), secret: `whsec_${randomBytes(16).toString('base64')}` } },
        -32602,
      ],
      [
        'no whsec_ prefix',
        { ...valid, delivery: { url: receiver.url('/x'), secret: randomBytes(32).toString('base64') } },
        -32602,
      ],
      ['unknown event', { ...valid, name: 'email.sent', delivery: { url: receiver.url('/x'), secret } }, -32011],
      [
        'bad arguments',
        { ...valid, arguments: { colour: 'red' }, delivery: { url: receiver.url('/x'), secret } },
        -32602,
      ],
      [
        'unknown mailbox',
        { ...valid, arguments: { mailbox_id: otherMailbox }, delivery: { url: receiver.url('/x'), secret } },
        -32602,
      ],
      ['malformed cursor', { ...valid, cursor: 'not-a-cursor', delivery: { url: receiver.url('/x'), secret } }, -32602],
      [
        'push mode',
        { ...valid, delivery: { mode: 'push', url: receiver.url('/x'), secret } },
        -32014,
        { feature: 'deliveryMode', value: 'push' },
      ],
    ];
    for (const [what, params, code, data] of cases) {
      const err = await refusal(subscribe(agent, params));
      assert.equal(err.code, code, `${what}: ${err.message}`);
      if (data) assert.deepEqual(err.data, data, what);
    }
    // A receiver that does not echo the challenge, and a closed port.
    const silentPath = hookPath(secret);
    receiver.answer = (hook) => (hook.path === silentPath ? 200 : echoChallenge(hook));
    try {
      const silent = await refusal(subscribe(agent, { ...valid, delivery: { url: receiver.url(silentPath), secret } }));
      assert.equal(silent.code, -32015);
      assert.deepEqual(silent.data, { reason: 'challenge_failed' });
    } finally {
      receiver.answer = echoChallenge;
    }
    const closed = await refusal(subscribe(agent, { ...valid, delivery: { url: 'https://127.0.0.1:9/x', secret } }));
    assert.equal(closed.code, -32015);
    assert.deepEqual(closed.data, { reason: 'connection_refused' });
    // None of them made a subscription.
    const [{ count }] = await db.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM event_subscriptions WHERE url LIKE '%/x' OR url LIKE $1`,
      [`%${silentPath}`],
    );
    assert.equal(count, 0);
  });

  it('keeps delivering when the replica that took the subscription is killed', async () => {
    const secret = newSecret();
    const path = hookPath(secret);
    const [first, second] = servers;
    const onSecond = await connectMcp2026(second.url, token.secret, { capabilities: DECLARES_EVENTS });
    try {
      const survivorAdmin = new RestClient(second.url, adminSecret);
      // Made through the first replica, which is then killed outright.
      await subscribe(agent, {
        name: 'email.received',
        arguments: { mailbox_id: mailbox, subject_contains: 'survivor' },
        delivery: { url: receiver.url(path), secret },
        cursor: null,
      });
      await first.stop('SIGKILL');
      const id = await ingest(survivorAdmin, mailbox, { subject: 'survivor' });
      const hook = await waitFor('delivery by the survivor', () => occurrences(path).find((h) => h.id === id), {
        timeoutMs: 20_000,
      });
      assert.equal(hook.body.data.subject, 'survivor');
      admin = survivorAdmin;
      await agent.close();
      agent = onSecond;
    } catch (err) {
      await onSecond.close();
      throw err;
    }
  });

  it('ends the subscriptions of a revoked token with a signed terminated envelope', async () => {
    const secret = newSecret();
    const path = hookPath(secret);
    const [, survivor] = servers;
    const doomed = await createToken(admin, { scopes: ['mail:read'], mailboxes: [mailbox] });
    const client = await connectMcp2026(survivor.url, doomed.secret, { capabilities: DECLARES_EVENTS });
    try {
      const sub = await subscribe(client, {
        name: 'email.received',
        arguments: {},
        delivery: { url: receiver.url(path), secret },
        cursor: null,
      });
      assert.equal((await admin.delete(`/v1/tokens/${doomed.id}`)).status, 204);
      const terminated: ReceivedWebhook = await waitFor('terminated', () =>
        receiver.to(path).find((h) => h.body.type === 'terminated'),
      );
      assert.equal(terminated.headers['x-mcp-subscription-id'], sub.id);
      assert.match(terminated.id, /^msg_terminated_/);
      assert.equal(terminated.body.error.code, -32012);
      const id = await ingest(admin, mailbox, { subject: 'after revocation' });
      const next = hookPath(secret);
      await subscribe(agent, {
        name: 'email.received',
        arguments: { mailbox_id: mailbox, subject_contains: 'revocation' },
        delivery: { url: receiver.url(next), secret },
        cursor: null,
      });
      await ingest(admin, mailbox, { subject: 'revocation, once more' });
      await waitFor('a later delivery elsewhere', () => occurrences(next).length === 1);
      assert.ok(!occurrences(path).some((h) => h.id === id), 'nothing for a revoked token');
    } finally {
      await client.close();
    }
  });
});
