import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { secretsKey } from '../support/connected-mailboxes';
import { createTestDatabase, TestDatabase } from '../support/database';
import { RestClient } from '../support/rest';
import { spawnServer, SpawnedServer } from '../support/spawned-server';
import { createMailbox, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/** A spawned server on a database of its own, with an admin client and a mailbox. */
interface Deployment {
  db: TestDatabase;
  server: SpawnedServer;
  admin: RestClient;
  mailbox: string;
}

/**
 * docs/webhooks.md, "HTTPS endpoints": a receiver whose certificate a private CA issued (a throwaway
 * one made by the test) gets signed deliveries from a server process that trusts the CA through
 * NODE_EXTRA_CA_CERTS, as an operator configures it; the same receiver gets nothing from a server
 * without it, whose every attempt records the TLS error and is retried. Each server has its own
 * database: two servers on one would be replicas, delivering each other's queue.
 */
describe('webhooks to HTTPS endpoints', () => {
  let receiver: WebhookReceiver;
  let trusting: Deployment;
  let untrusting: Deployment;

  const deploy = async (trust: { NODE_EXTRA_CA_CERTS: string | undefined }): Promise<Deployment> => {
    const db = await createTestDatabase();
    const adminToken = randomSecret();
    const server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_BOOTSTRAP_TOKEN: adminToken,
      ALCARTA_SECRETS_KEY: secretsKey(),
      ALCARTA_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      // Retries 0.5–1 s, then 1–2 s apart: a test sees a few of them.
      ALCARTA_WEBHOOK_RETRY_BASE_SECONDS: '1',
      ...trust,
    });
    const admin = new RestClient(server.url, adminToken);
    return { db, server, admin, mailbox: await createMailbox(admin) };
  };

  /** An endpoint of `at`'s mailbox at the receiver's `path`; the receiver checks every POST with its secret. */
  const createEndpoint = async (at: Deployment, path: string): Promise<string> => {
    const res = await at.admin.post('/v1/webhooks', {
      url: receiver.url(path),
      events: ['message_received'],
      mailbox_ids: [at.mailbox],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.match(res.body.url as string, /^https:\/\/127\.0\.0\.1:\d+\//);
    receiver.expectSecrets(path, res.body.secret as string);
    return res.body.webhook_id as string;
  };

  const deliveries = async (at: Deployment, id: string) => {
    const res = await at.admin.get(`/v1/webhooks/${id}/deliveries`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.deliveries as Array<Record<string, any>>;
  };

  before(async () => {
    receiver = await WebhookReceiver.startHttps();
    // NODE_EXTRA_CA_CERTS unset explicitly: the second server must not inherit a trust from outside.
    [trusting, untrusting] = await Promise.all([
      deploy({ NODE_EXTRA_CA_CERTS: receiver.caFile }),
      deploy({ NODE_EXTRA_CA_CERTS: undefined }),
    ]);
  });

  after(async () => {
    for (const at of [trusting, untrusting]) {
      await at?.server.stop();
      await at?.db.drop();
    }
    await receiver?.close();
  });

  it('delivers signed events to an https:// endpoint whose CA the server trusts (NODE_EXTRA_CA_CERTS)', async () => {
    const id = await createEndpoint(trusting, '/trusted');
    const messageId = await ingest(trusting.admin, trusting.mailbox, { subject: 'over TLS' });
    // `to` fails unless the POST verified with the endpoint's secret (standardwebhooks).
    const [post] = await waitFor('the delivery over HTTPS', () => {
      const posts = receiver.to('/trusted');
      return posts.length > 0 ? posts : undefined;
    });
    assert.equal(post.body.type, 'message_received');
    assert.equal(post.body.message_id, messageId);
    assert.equal(post.body.subject, 'over TLS');
    assert.match(post.id, /^whd_/);
    const [stored] = await trusting.db.query<{ payload: Record<string, unknown> }>(
      'SELECT payload FROM events WHERE id = $1',
      [post.body.cursor],
    );
    assert.deepEqual(post.body, { ...stored.payload, cursor: post.body.cursor });
    const [delivery] = await waitFor('the delivery recorded as delivered', async () => {
      const list = await deliveries(trusting, id);
      return list[0]?.status === 'delivered' ? list : undefined;
    });
    assert.equal(delivery.delivery_id, post.id);
    assert.deepEqual(
      delivery.attempts.map((a: Record<string, unknown>) => [a.status_code, a.error]),
      [[204, null]],
    );
  });

  it('a server that does not trust the CA sends nothing; each attempt records the TLS error and is retried', async () => {
    const id = await createEndpoint(untrusting, '/untrusted');
    await ingest(untrusting.admin, untrusting.mailbox, { subject: 'not over TLS' });
    const [delivery] = await waitFor(
      'two failed attempts',
      async () => {
        const list = await deliveries(untrusting, id);
        return list[0]?.attempts.length >= 2 ? list : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal(delivery.status, 'retrying');
    assert.ok(delivery.next_attempt_at, 'another attempt is scheduled');
    for (const attempt of delivery.attempts as Array<Record<string, unknown>>) {
      assert.equal(attempt.status_code, null);
      // Node's message; Node 24 appends a hint (`…; if the root CA is installed locally, try …`).
      assert.match(String(attempt.error), /^unable to verify the first certificate(;|$)/);
    }
    assert.match(delivery.last_error, /^unable to verify the first certificate(;|$)/);
    assert.deepEqual(receiver.to('/untrusted'), [], 'no POST reached the receiver');
    const endpoint = await untrusting.admin.get(`/v1/webhooks/${id}`);
    assert.equal(endpoint.body.enabled, true);
    assert.ok(endpoint.body.failing_since, 'the endpoint is failing since the first attempt');
  });
});
