import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCliWith } from '../support/cli';
import { secretsKey } from '../support/connected-mailboxes';
import { createMailbox, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * `alcarta webhooks …` (docs/webhooks.md, "From the command line") on the server's database: an
 * endpoint created by the operator shows its secret once and is the one REST shows, its deliveries
 * are those a real receiver got signed with that secret, a rotated secret signs the next ones, and a
 * bad URL is refused with REST's reason. Each CLI process takes seconds: the test runs few.
 */
describe('webhooks from the command line', () => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let mailbox: string;
  const key = secretsKey();
  const env = { ALCARTA_SECRETS_KEY: key, ALCARTA_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' };
  const cli = (...args: string[]) => runCliWith({ env }, server.db.url, ...args);

  before(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer({ env });
    mailbox = await createMailbox(server.admin);
  });

  after(async () => {
    await server?.close();
    await receiver?.close();
  });

  it('creates, lists, rotates, shows deliveries of and deletes an endpoint', async () => {
    const created = await cli(
      'webhooks',
      'create',
      '--url',
      receiver.url('/cli'),
      '--events',
      'message_received,request_created',
      '--mailboxes',
      mailbox,
      '--description',
      'from the CLI',
    );
    assert.equal(created.code, 0, created.stderr);
    const id = /^webhook_id: +(whk_\S+)$/m.exec(created.stdout)?.[1];
    const secret = /^secret: +(whsec_\S+)$/m.exec(created.stdout)?.[1];
    assert.ok(id && secret, created.stdout);
    assert.match(created.stdout, /shown only now/);
    receiver.expectSecrets('/cli', secret);

    const shown = await server.admin.get(`/v1/webhooks/${id}`);
    assert.equal(shown.status, 200, JSON.stringify(shown.body));
    assert.equal(shown.body.url, receiver.url('/cli'));
    assert.deepEqual(shown.body.events, ['message_received', 'request_created']);
    assert.deepEqual(shown.body.mailbox_ids, [mailbox]);
    assert.equal(shown.body.description, 'from the CLI');
    assert.equal(shown.body.secret, undefined);

    const listed = await cli('webhooks', 'list', '--json');
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout), (await server.admin.get('/v1/webhooks')).body);
    assert.ok(!listed.stdout.includes(secret), 'a listing never shows a secret');

    // A message arrives: the receiver gets it signed with the secret the CLI printed.
    await ingest(server.admin, mailbox, { subject: 'for the CLI endpoint' });
    await waitFor('the delivery', () => receiver.to('/cli').length === 1);

    const rotated = await cli('webhooks', 'rotate-secret', id, '--json');
    assert.equal(rotated.code, 0, rotated.stderr);
    const rotatedBody = JSON.parse(rotated.stdout) as Record<string, unknown>;
    assert.equal(rotatedBody.webhook_id, id);
    assert.match(rotatedBody.secret as string, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.notEqual(rotatedBody.secret, secret);
    assert.ok(rotatedBody.previous_secret_expires_at, 'the old secret still signs for a while');
    receiver.expectSecrets('/cli', rotatedBody.secret as string, secret);
    await ingest(server.admin, mailbox, { subject: 'after the rotation' });
    await waitFor('the second delivery', () => receiver.to('/cli').length === 2);
    await waitFor('both deliveries recorded as delivered', async () => {
      const res = await server.admin.get(`/v1/webhooks/${id}/deliveries`);
      return (res.body.deliveries as Array<{ status: string }>).filter((d) => d.status === 'delivered').length === 2;
    });

    const deliveries = await cli('webhooks', 'deliveries', id, '--json');
    assert.equal(deliveries.code, 0, deliveries.stderr);
    assert.deepEqual(JSON.parse(deliveries.stdout), (await server.admin.get(`/v1/webhooks/${id}/deliveries`)).body);
    const shownDeliveries = JSON.parse(deliveries.stdout).deliveries as Array<Record<string, unknown>>;
    assert.deepEqual(
      shownDeliveries.map((d) => [d.event_type, d.status]),
      [
        ['message_received', 'delivered'],
        ['message_received', 'delivered'],
      ],
    );

    const deleted = await cli('webhooks', 'delete', id);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal(deleted.stdout.trim(), `deleted ${id}`);
    const gone = await server.admin.get(`/v1/webhooks/${id}`);
    assert.equal(gone.status, 404);
    const actions = await server.db.query<{ action: string }>(
      `SELECT action FROM audit_log WHERE subject->>'webhook_id' = $1 ORDER BY seq`,
      [id],
    );
    assert.deepEqual(
      actions.map((a) => a.action),
      ['webhook_created', 'webhook_secret_rotated', 'webhook_deleted'],
    );
  });

  it('refuses a bad URL with the reason REST gives, and a missing flag as a usage error', async () => {
    const before = (await server.admin.get('/v1/webhooks')).body;
    const bad = await cli(
      'webhooks',
      'create',
      '--url',
      'ftp://example.org/hook',
      '--events',
      'message_received',
      '--mailboxes',
      mailbox,
    );
    assert.equal(bad.code, 1, bad.stdout);
    assert.match(bad.stderr, /\(invalid_url\)/);
    assert.equal(bad.stdout, '');
    const usage = await cli('webhooks', 'create', '--url', receiver.url('/x'), '--mailboxes', mailbox);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--events is required/);
    assert.deepEqual((await server.admin.get('/v1/webhooks')).body, before, 'nothing was created');
  });
});
