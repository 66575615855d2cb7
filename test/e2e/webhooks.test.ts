import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Webhook } from 'standardwebhooks';
import { secretsKey } from '../support/connected-mailboxes';
import { callOk, connectMcp } from '../support/mcp';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

const ALL_TYPES = ['message_received', 'request_state_changed', 'message_delivery_changed', 'mailbox_source_changed'];

/**
 * docs/webhooks.md end to end: endpoints managed over REST (bad input refused with its reason,
 * another tenant's endpoints unknown), events POSTed to a real HTTP receiver on 127.0.0.1 that
 * verifies every signature with the `standardwebhooks` library, retries with the same webhook-id,
 * 410 and 3 days of failures disabling an endpoint, secret rotation, replay, and two replicas
 * delivering each event once.
 */
describe('webhooks', () => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let mailbox: string;
  let agent: Client;
  let paths = 0;
  const env = {
    ALCARTA_SECRETS_KEY: secretsKey(),
    ALCARTA_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    // Retries 0.5–1 s, then 1–2 s apart: a test sees a few of them.
    ALCARTA_WEBHOOK_RETRY_BASE_SECONDS: '1',
    // Retention runs every second (it deletes nothing younger than ALCARTA_EVENT_RETENTION_DAYS).
    ALCARTA_HOUSEKEEPING_SECONDS: '1',
  };

  /** Creates an endpoint at a fresh receiver path; the receiver checks every POST with its secret. */
  const createEndpoint = async (body: Record<string, unknown> = {}, admin = server.admin) => {
    const path = `/hook-${++paths}`;
    const res = await admin.post('/v1/webhooks', {
      url: receiver.url(path),
      events: ALL_TYPES,
      mailbox_ids: [mailbox],
      ...body,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    receiver.expectSecrets(path, res.body.secret as string);
    return { path, id: res.body.webhook_id as string, secret: res.body.secret as string, body: res.body };
  };
  /** The stored event with this cursor, as a webhook carries it. */
  const eventBody = async (cursor: string) => {
    const [row] = await server.db.query<{ payload: Record<string, unknown> }>(
      'SELECT payload FROM events WHERE id = $1',
      [cursor],
    );
    return { ...row.payload, cursor } as Record<string, unknown>;
  };
  const deliveries = async (id: string) => {
    const res = await server.admin.get(`/v1/webhooks/${id}/deliveries`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.deliveries as Array<Record<string, any>>;
  };

  before(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer({ env });
    mailbox = await createMailbox(server.admin);
    const agentToken = await createToken(server.admin, {
      scopes: ['mail:send', 'mail:read', 'approvals:read'],
      mailboxes: [mailbox],
    });
    agent = await connectMcp(server.url, agentToken.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    await receiver?.close();
  });

  it('creates, shows, changes and deletes an endpoint; the secret is shown once', async () => {
    const { id, secret, body } = await createEndpoint({ description: 'billing' });
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.doesNotThrow(() => new Webhook(secret));
    assert.equal(body.enabled, true);
    assert.deepEqual(body.mailbox_ids, [mailbox]);
    const shown = await server.admin.get(`/v1/webhooks/${id}`);
    assert.equal(shown.status, 200);
    assert.equal(shown.body.secret, undefined);
    assert.equal(shown.body.description, 'billing');
    assert.ok(JSON.stringify((await server.admin.get('/v1/webhooks')).body).includes(id));
    assert.ok(!JSON.stringify((await server.admin.get('/v1/webhooks')).body).includes(secret));
    const changed = await server.admin.patch(`/v1/webhooks/${id}`, { events: ['message_received'], description: 'x' });
    assert.equal(changed.status, 200, JSON.stringify(changed.body));
    assert.deepEqual(changed.body.events, ['message_received']);
    assert.equal((await server.admin.delete(`/v1/webhooks/${id}`)).status, 204);
    const gone = await server.admin.get(`/v1/webhooks/${id}`);
    assert.equal(gone.status, 404);
    assert.equal(gone.body.reason, 'webhook_not_found');
    const actions = await server.db.query<{ action: string }>(
      `SELECT action FROM audit_log WHERE subject->>'webhook_id' = $1 ORDER BY seq`,
      [id],
    );
    assert.deepEqual(
      actions.map((a) => a.action),
      ['webhook_created', 'webhook_updated', 'webhook_deleted'],
    );
  });

  it('refuses bad endpoints with a specific reason', async () => {
    const post = (body: Record<string, unknown>) =>
      server.admin.post('/v1/webhooks', {
        url: receiver.url('/bad'),
        events: ALL_TYPES,
        mailbox_ids: [mailbox],
        ...body,
      });
    const cases: Array<[string, Record<string, unknown>, number, string]> = [
      ['ftp URL', { url: 'ftp://example.org/hook' }, 400, 'invalid_url'],
      ['file URL', { url: 'file:///etc/passwd' }, 400, 'invalid_url'],
      ['no URL', { url: 'not a url' }, 400, 'invalid_url'],
      ['unknown event type', { events: ['message_received', 'mailbox_deleted'] }, 400, 'unknown_event_type'],
      ['no events', { events: [] }, 400, 'invalid_field'],
      ['unknown mailbox', { mailbox_ids: ['mbx_0000000000000000000000'] }, 404, 'mailbox_not_found'],
      ['* and a mailbox', { mailbox_ids: ['*', mailbox] }, 400, 'invalid_mailboxes'],
      ['long description', { description: 'd'.repeat(501) }, 400, 'invalid_field'],
      ['unknown field', { secret: 'whsec_mine' }, 400, 'unknown_field'],
    ];
    for (const [what, body, status, reason] of cases) {
      const res = await post(body);
      assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.reason, reason, `${what}: ${JSON.stringify(res.body)}`);
    }
    const long = await post({ description: 'd'.repeat(501) });
    assert.equal(long.body.field, 'description');
    const { id } = await createEndpoint();
    const patched = await server.admin.patch(`/v1/webhooks/${id}`, { url: 'gopher://example.org/' });
    assert.equal(patched.body.reason, 'invalid_url', JSON.stringify(patched.body));
    const replay = await server.admin.post(`/v1/webhooks/${id}/replay`, { since_cursor: 'yesterday' });
    assert.equal(replay.status, 400);
    assert.equal(replay.body.field, 'since_cursor');
    assert.equal((await server.admin.get('/v1/webhooks/whk_unknown0000000000000000')).body.reason, 'webhook_not_found');
  });

  it("a webhooks:manage token bound to its mailboxes sees only its endpoints; another tenant's are unknown", async () => {
    const own = await createMailbox(server.admin);
    const tenant = server.admin.withToken(
      (await createToken(server.admin, { scopes: ['webhooks:manage'], mailboxes: [own] })).secret,
    );
    const theirs = await createEndpoint();
    const everywhere = await createEndpoint({ mailbox_ids: ['*'] });
    const mine = await createEndpoint({ mailbox_ids: [own] }, tenant);
    const listed = (await tenant.get('/v1/webhooks')).body.webhooks.map((w: { webhook_id: string }) => w.webhook_id);
    assert.deepEqual(listed, [mine.id]);
    for (const other of [theirs.id, everywhere.id]) {
      for (const res of [
        await tenant.get(`/v1/webhooks/${other}`),
        await tenant.patch(`/v1/webhooks/${other}`, { description: 'mine now' }),
        await tenant.post(`/v1/webhooks/${other}/rotate-secret`),
        await tenant.post(`/v1/webhooks/${other}/replay`, { since_cursor: '0' }),
        await tenant.get(`/v1/webhooks/${other}/deliveries`),
        await tenant.delete(`/v1/webhooks/${other}`),
      ]) {
        assert.equal(res.status, 404, JSON.stringify(res.body));
        assert.equal(res.body.reason, 'webhook_not_found');
      }
    }
    for (const mailboxIds of [[mailbox], ['*'], [own, mailbox]]) {
      const res = await tenant.post('/v1/webhooks', {
        url: receiver.url('/x'),
        events: ALL_TYPES,
        mailbox_ids: mailboxIds,
      });
      assert.equal(res.status, 404, JSON.stringify(res.body));
      assert.equal(res.body.reason, 'mailbox_not_found');
    }
    const moved = await tenant.patch(`/v1/webhooks/${mine.id}`, { mailbox_ids: [mailbox] });
    assert.equal(moved.body.reason, 'mailbox_not_found');
    const reader = server.admin.withToken(
      (await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] })).secret,
    );
    assert.equal((await reader.get('/v1/webhooks')).status, 403);
    for (const { id } of [theirs, everywhere, mine])
      assert.equal((await server.admin.delete(`/v1/webhooks/${id}`)).status, 204);
  });

  it('POSTs message_received, request_state_changed and message_delivery_changed with the event and its cursor', async () => {
    const hook = await createEndpoint();
    const other = await createEndpoint({ mailbox_ids: [await createMailbox(server.admin)] });
    const messageId = await ingest(server.admin, mailbox, { subject: 'Invoice 42' });
    const received = await waitFor('message_received', () =>
      receiver.to(hook.path).find((r) => r.body.type === 'message_received' && r.body.message_id === messageId),
    );
    assert.deepEqual(received.body, await eventBody(received.body.cursor));
    assert.equal(received.body.subject, 'Invoice 42');
    assert.equal(received.body.mailbox_id, mailbox);
    assert.match(received.id, /^whd_/);

    const { request_id: requestId } = await callOk(agent, 'send_email', {
      mailbox_id: mailbox,
      to: ['cfo@example.org'],
      subject: 'Numbers',
      text: 'Attached.',
    });
    const approved = await server.admin.post(`/v1/requests/${requestId}/approve`, { reason: 'fine' });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    const stateChanged = await waitFor('request_state_changed approved', () =>
      receiver.to(hook.path).find((r) => r.body.type === 'request_state_changed' && r.body.state === 'approved'),
    );
    assert.equal(stateChanged.body.request_id, requestId);
    assert.deepEqual(stateChanged.body, await eventBody(stateChanged.body.cursor));
    const deliveryChanged = await waitFor('message_delivery_changed', () =>
      receiver.to(hook.path).find((r) => r.body.type === 'message_delivery_changed' && r.body.request_id === requestId),
    );
    assert.equal(deliveryChanged.body.status, 'not_configured');
    assert.deepEqual(deliveryChanged.body, await eventBody(deliveryChanged.body.cursor));
    assert.ok(BigInt(deliveryChanged.body.cursor as string) > BigInt(received.body.cursor as string));

    const listed = await waitFor('every delivery recorded', async () => {
      const list = await deliveries(hook.id);
      return list.every((d) => d.status === 'delivered') ? list : undefined;
    });
    assert.equal(listed.length, receiver.to(hook.path).length);
    for (const d of listed) {
      assert.deepEqual(
        d.attempts.map((a: { status_code: number }) => a.status_code),
        [204],
      );
    }
    assert.deepEqual(receiver.to(other.path), [], 'an endpoint of another mailbox gets none of them');
  });

  it("POSTs request_created for an agent's request_approval, its cursor before the request's pending state", async () => {
    const hook = await createEndpoint({ events: ['request_created', 'request_state_changed'] });
    const { request_id: requestId } = await callOk(agent, 'request_approval', {
      mailbox_id: mailbox,
      title: 'Pay invoice 42',
    });
    const created = await waitFor('request_created', () =>
      receiver.to(hook.path).find((r) => r.body.type === 'request_created' && r.body.request_id === requestId),
    );
    assert.deepEqual(created.body, await eventBody(created.body.cursor));
    assert.equal(created.body.title, 'Pay invoice 42');
    assert.equal(created.body.kind, 'approval');
    assert.equal(created.body.mailbox_id, mailbox);
    assert.match(created.body.cursor as string, /^\d+$/);
    const pending = await waitFor('request_state_changed pending', () =>
      receiver
        .to(hook.path)
        .find(
          (r) =>
            r.body.type === 'request_state_changed' && r.body.request_id === requestId && r.body.state === 'pending',
        ),
    );
    // Deliveries may arrive in any order; the event log's order is the cursor's.
    assert.ok(BigInt(created.body.cursor as string) < BigInt(pending.body.cursor as string));
    assert.notEqual(created.id, pending.id);
  });

  it('retries an endpoint that is down with the same webhook-id until it answers 2xx', async () => {
    const hook = await createEndpoint({ events: ['message_received'] });
    let failures = 0;
    receiver.answer = (r) => (r.path === hook.path && failures++ < 2 ? 503 : 204);
    await ingest(server.admin, mailbox);
    const [delivery] = await waitFor('the delivery delivered after two failures', async () => {
      const list = await deliveries(hook.id);
      return list[0]?.status === 'delivered' ? list : undefined;
    });
    assert.deepEqual(
      delivery.attempts.map((a: { status_code: number }) => a.status_code),
      [503, 503, 204],
    );
    const posts = receiver.to(hook.path);
    assert.equal(posts.length, 3);
    assert.deepEqual(new Set(posts.map((p) => p.id)), new Set([delivery.delivery_id]));
    assert.equal((await server.admin.get(`/v1/webhooks/${hook.id}`)).body.failing_since, null);
    receiver.answer = () => 204;
  });

  it('an endpoint whose secret cannot be opened gets failed attempts, and holds up no other endpoint', async () => {
    const broken = await createEndpoint({ events: ['message_received'] });
    const healthy = await createEndpoint({ events: ['message_received'] });
    // As if sealed with a key this server does not have (a replica started with another ALCARTA_SECRETS_KEY).
    await server.db.query(
      `UPDATE webhook_endpoints SET secret_sealed = regexp_replace(secret_sealed, '^v1[.][^.]+[.]', 'v1.deadbeef.')
        WHERE id = $1`,
      [broken.id],
    );
    await ingest(server.admin, mailbox);
    await waitFor('the healthy endpoint served', () => receiver.to(healthy.path).length === 1);
    const [delivery] = await waitFor('a failed attempt recorded', async () => {
      const list = await deliveries(broken.id);
      return list[0]?.attempts.length >= 1 ? list : undefined;
    });
    assert.equal(delivery.status, 'retrying');
    assert.equal(delivery.attempts[0].status_code, null);
    assert.match(delivery.attempts[0].error, /^not sent: a secret was sealed with key deadbeef/);
    assert.equal(receiver.to(broken.path).length, 0);
    assert.equal((await server.admin.delete(`/v1/webhooks/${broken.id}`)).status, 204);
  });

  it('410 disables the endpoint with a webhook_disabled event, and it gets nothing more', async () => {
    const hook = await createEndpoint({ events: ['message_received'] });
    receiver.answer = (r) => (r.path === hook.path ? 410 : 204);
    await ingest(server.admin, mailbox);
    const shown = await waitFor('the endpoint disabled', async () => {
      const res = await server.admin.get(`/v1/webhooks/${hook.id}`);
      return res.body.enabled === false ? res.body : undefined;
    });
    assert.equal(shown.disabled_reason, 'gone');
    const events = await server.db.query<{ payload: Record<string, unknown> }>(
      `SELECT payload FROM events WHERE type = 'webhook_disabled' AND payload->>'webhook_id' = $1`,
      [hook.id],
    );
    assert.equal(events.length, 1);
    assert.equal(events[0].payload.reason, 'gone');
    await ingest(server.admin, mailbox);
    assert.equal((await deliveries(hook.id)).length, 1, 'no delivery is queued for a disabled endpoint');
    const enabled = await server.admin.patch(`/v1/webhooks/${hook.id}`, { enabled: true });
    assert.equal(enabled.body.enabled, true);
    assert.equal(enabled.body.disabled_reason, null);
    receiver.answer = () => 204;
  });

  it('an endpoint failing for 3 days is disabled with a webhook_disabled event', async () => {
    const hook = await createEndpoint({ events: ['message_received'] });
    await server.db.query(
      `UPDATE webhook_endpoints SET failing_since = now() - interval '3 days 1 minute' WHERE id = $1`,
      [hook.id],
    );
    receiver.answer = (r) => (r.path === hook.path ? 500 : 204);
    await ingest(server.admin, mailbox);
    const shown = await waitFor('the endpoint disabled', async () => {
      const res = await server.admin.get(`/v1/webhooks/${hook.id}`);
      return res.body.enabled === false ? res.body : undefined;
    });
    assert.equal(shown.disabled_reason, 'failing');
    const [delivery] = await deliveries(hook.id);
    assert.equal(delivery.status, 'failed');
    const [event] = await server.db.query<{ mailbox_id: string }>(
      `SELECT mailbox_id FROM events WHERE type = 'webhook_disabled' AND payload->>'webhook_id' = $1`,
      [hook.id],
    );
    assert.equal(event.mailbox_id, mailbox);
    receiver.answer = () => 204;
  });

  it('after a rotation both secrets verify every delivery during the overlap', async () => {
    const hook = await createEndpoint({ events: ['message_received'] });
    const rotated = await server.admin.post(`/v1/webhooks/${hook.id}/rotate-secret`);
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const secret = rotated.body.secret as string;
    assert.notEqual(secret, hook.secret);
    assert.ok(Date.parse(rotated.body.previous_secret_expires_at) > Date.now() + 23 * 3600_000);
    receiver.expectSecrets(hook.path, hook.secret, secret);
    await ingest(server.admin, mailbox);
    const [post] = await waitFor('a delivery', () =>
      receiver.to(hook.path).length > 0 ? receiver.to(hook.path) : undefined,
    );
    assert.equal(post.signature.split(' ').length, 2);
    // Once the overlap is over, only the new secret signs.
    await server.db.query(`UPDATE webhook_endpoints SET previous_secret_expires_at = now() WHERE id = $1`, [hook.id]);
    receiver.expectSecrets(hook.path, secret);
    await ingest(server.admin, mailbox);
    const later = await waitFor('a second delivery', () => receiver.to(hook.path)[1]);
    assert.equal(later.signature.split(' ').length, 1);
  });

  it('replays the events after a cursor as new deliveries', async () => {
    const hook = await createEndpoint({ events: ['message_received'] });
    for (let i = 0; i < 3; i++) await ingest(server.admin, mailbox, { subject: `replay ${i}` });
    const first = await waitFor('three deliveries', () =>
      receiver.to(hook.path).length === 3 ? receiver.to(hook.path) : undefined,
    );
    const cursors = first.map((p) => p.body.cursor as string).sort((a, b) => Number(BigInt(a) - BigInt(b)));
    const res = await server.admin.post(`/v1/webhooks/${hook.id}/replay`, { since_cursor: cursors[0] });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.queued, 2);
    const again = await waitFor('two replayed deliveries', () =>
      receiver.to(hook.path).length === 5 ? receiver.to(hook.path).slice(3) : undefined,
    );
    assert.deepEqual(again.map((p) => p.body.cursor).sort(), cursors.slice(1).sort());
    assert.equal(
      new Set(receiver.to(hook.path).map((p) => p.id)).size,
      5,
      'a replay is a new delivery, with a new webhook-id',
    );
  });

  it('reports attempts by outcome, the queue and failing endpoints in /metrics', async () => {
    const hook = await createEndpoint({ events: ['message_received'] });
    receiver.answer = (r) => (r.path === hook.path ? 500 : 204);
    await ingest(server.admin, mailbox);
    await waitFor('a failed attempt', async () => (await deliveries(hook.id))[0]?.status === 'retrying');
    const text = await (await fetch(new URL('/metrics', server.url))).text();
    const value = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? NaN);
    assert.ok(value(/^alcarta_webhook_deliveries_total\{outcome="delivered"\} (\d+)$/m) > 0);
    assert.ok(value(/^alcarta_webhook_deliveries_total\{outcome="retrying"\} (\d+)$/m) > 0);
    assert.ok(value(/^alcarta_webhook_deliveries_total\{outcome="gone"\} (\d+)$/m) >= 1);
    assert.ok(value(/^alcarta_webhook_queue_depth (\d+)$/m) >= 1);
    assert.ok(value(/^alcarta_webhook_oldest_queued_age_seconds ([\d.e+-]+)$/m) >= 0);
    const failing = new RegExp(
      `^alcarta_webhook_endpoint_failing_seconds\\{webhook_id="${hook.id}"\\} ([\\d.e+-]+)$`,
      'm',
    );
    assert.ok(value(failing) >= 0, 'the failing endpoint has a gauge');
    await server.admin.delete(`/v1/webhooks/${hook.id}`);
    receiver.answer = () => 204;
  });

  it('deletes finished deliveries as old as the event retention, never those under way', async () => {
    const hook = await createEndpoint({ events: ['message_received'] });
    await ingest(server.admin, mailbox);
    await ingest(server.admin, mailbox);
    const [kept, old] = await waitFor('two deliveries delivered', async () => {
      const list = await deliveries(hook.id);
      return list.length === 2 && list.every((d) => d.status === 'delivered') ? list : undefined;
    });
    // One finished delivery, and one still retrying, both from before the retention period.
    await server.db.query(`UPDATE webhook_deliveries SET created_at = now() - interval '31 days' WHERE id = ANY($1)`, [
      [kept.delivery_id, old.delivery_id],
    ]);
    await server.db.query(
      `UPDATE webhook_deliveries SET status = 'retrying', next_attempt_at = now() + interval '1 hour' WHERE id = $1`,
      [kept.delivery_id],
    );
    const left = await waitFor('the finished delivery deleted', async () => {
      const list = await deliveries(hook.id);
      return list.length === 1 ? list : undefined;
    });
    assert.equal(left[0].delivery_id, kept.delivery_id);
    const attempts = await server.db.query('SELECT 1 FROM webhook_attempts WHERE delivery_id = $1', [old.delivery_id]);
    assert.equal(attempts.length, 0, 'its attempts went with it');
  });

  it('two replicas deliver each event once', async () => {
    const second = await startTestServer({ db: server.db, env, adminToken: server.adminToken });
    try {
      const hook = await createEndpoint({ events: ['message_received'] });
      const count = 20;
      await Promise.all(
        Array.from({ length: count }, (_, i) =>
          ingest(i % 2 ? server.admin : second.admin, mailbox, { subject: `r${i}` }),
        ),
      );
      await waitFor('every event delivered', async () => {
        const [{ pending }] = await server.db.query<{ pending: number }>(
          `SELECT count(*)::int AS pending FROM webhook_deliveries WHERE endpoint_id = $1 AND status <> 'delivered'`,
          [hook.id],
        );
        return receiver.to(hook.path).length >= count && pending === 0;
      });
      const posts = receiver.to(hook.path);
      assert.equal(posts.length, count);
      assert.equal(new Set(posts.map((p) => p.id)).size, count);
      assert.equal(new Set(posts.map((p) => p.body.cursor)).size, count);
    } finally {
      await second.close({ keepDatabase: true });
    }
  });
});
