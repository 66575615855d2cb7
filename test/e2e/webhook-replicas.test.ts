import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { secretsKey } from '../support/connected-mailboxes';
import { createTestDatabase, TestDatabase } from '../support/database';
import { Replica, ReplicaSet } from '../support/replicas';
import { createMailbox, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/** The shortest lease allowed: it outlasts one attempt (10 s). */
const LEASE_SECONDS = 15;

/**
 * docs/webhooks.md, "Retries and disabling": real server processes on one database. When the
 * replica POSTing a delivery is SIGKILLed mid-POST, the other delivers it once the lease lapsed,
 * with the same webhook-id, signed as before.
 */
describe('webhooks across server processes', () => {
  const secret = randomSecret();
  /** One key for every replica: each opens the signing secrets the others sealed. */
  const key = secretsKey();
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  let replicas: ReplicaSet;
  let a: Replica;
  let b: Replica;

  before(async () => {
    db = await createTestDatabase();
    receiver = await WebhookReceiver.start();
    replicas = new ReplicaSet(db.url, secret, {
      ALCARTA_SMTP_PORT: 'off',
      ALCARTA_SECRETS_KEY: key,
      ALCARTA_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      ALCARTA_WEBHOOK_LEASE_SECONDS: String(LEASE_SECONDS),
      ALCARTA_RATE_LIMIT_PER_SECOND: '0',
      ALCARTA_LOG_LEVEL: 'warn',
    });
    a = await replicas.start('A'); // alone first: it runs the migrations
    b = await replicas.start('B');
  });

  after(async () => {
    await replicas?.stopAll();
    await receiver?.close();
    await db?.drop();
  });

  it('delivers through the other replica, with the same webhook-id, when the POSTing one is SIGKILLed', async () => {
    const mailbox = await createMailbox(a.admin);
    const created = await a.admin.post('/v1/webhooks', {
      url: receiver.url('/killed'),
      events: ['message_received'],
      mailbox_ids: [mailbox],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    receiver.expectSecrets('/killed', created.body.secret as string);
    let held = false;
    receiver.answer = () => {
      if (held) return 204;
      held = true;
      return 'hold';
    };
    await ingest(a.admin, mailbox);
    const first = await waitFor('the first POST, held', () => receiver.to('/killed')[0]);
    const [claim] = await db.query<{ claimed_by: string; status: string }>(
      'SELECT claimed_by, status FROM webhook_deliveries WHERE id = $1',
      [first.id],
    );
    assert.equal(claim.status, 'sending');
    const holderPid = Number(claim.claimed_by.split('/')[1]);
    const holder = [a, b].find((r) => r.server.pid === holderPid);
    assert.ok(holder, `the claim ${claim.claimed_by} names one of the replicas`);
    await replicas.stop(holder, 'SIGKILL');

    const delivered = await waitFor(
      'the other replica to deliver it after the lease lapsed',
      async () => {
        const [row] = await db.query<{ status: string; attempts: number }>(
          'SELECT status, attempts FROM webhook_deliveries WHERE id = $1',
          [first.id],
        );
        return row.status === 'delivered' ? row : undefined;
      },
      { timeoutMs: (LEASE_SECONDS + 20) * 1000, intervalMs: 100 },
    );
    assert.equal(delivered.attempts, 2);
    const posts = receiver.to('/killed');
    assert.equal(posts.length, 2);
    assert.deepEqual(
      posts.map((p) => p.id),
      [first.id, first.id],
    );
    assert.equal(posts[1].raw, first.raw);
  });

  it('a replica with ALCARTA_WEBHOOK_CONCURRENCY=0 queues deliveries with its events, and the others POST them', async () => {
    const ingestOnly = new ReplicaSet(db.url, secret, {
      ALCARTA_SMTP_PORT: 'off',
      ALCARTA_SECRETS_KEY: key,
      ALCARTA_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      ALCARTA_RATE_LIMIT_PER_SECOND: '0',
      ALCARTA_LOG_LEVEL: 'warn',
      ALCARTA_WEBHOOK_CONCURRENCY: '0',
    });
    try {
      const c = await ingestOnly.start('C');
      const mailbox = await createMailbox(c.admin);
      const created = await c.admin.post('/v1/webhooks', {
        url: receiver.url('/elsewhere'),
        events: ['message_received'],
        mailbox_ids: [mailbox],
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      receiver.expectSecrets('/elsewhere', created.body.secret as string);
      receiver.answer = () => 204;
      for (let i = 0; i < 5; i++) await ingest(c.admin, mailbox);
      await waitFor('the five events to be POSTed', () => receiver.to('/elsewhere').length >= 5);
      const attempts = async (replica: Replica) => {
        const text = await (await fetch(new URL('/metrics', replica.server.url))).text();
        return Number(/^alcarta_webhook_deliveries_total\{outcome="delivered"\} (\d+)$/m.exec(text)?.[1] ?? 0);
      };
      assert.equal(await attempts(c), 0, 'the replica that ingested POSTed none');
      const others = await Promise.all(replicas.running.map(attempts));
      assert.ok(
        others.reduce((sum, n) => sum + n, 0) >= 5,
        `the running replicas delivered them: ${JSON.stringify(others)}`,
      );
    } finally {
      await ingestOnly.stopAll();
    }
  });
});
