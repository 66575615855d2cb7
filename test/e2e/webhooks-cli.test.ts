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
 * are those a real receiver got signed with that secret, a rotated secret signs the next ones, an
 * update changes what is delivered and where, a replay delivers again, and bad input is refused
 * with REST's reason. Each CLI process takes seconds: the test runs few.
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

  it('updates an endpoint (disabled it gets nothing; enabled at a new URL it gets the next events there) and replays what it missed', async () => {
    const inbox = await createMailbox(server.admin);
    const created = await server.admin.post('/v1/webhooks', {
      url: receiver.url('/before'),
      events: ['message_received'],
      mailbox_ids: [inbox],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.webhook_id as string;
    receiver.expectSecrets('/before', created.body.secret as string);
    receiver.expectSecrets('/after', created.body.secret as string);
    const deliveries = async () =>
      (await server.admin.get(`/v1/webhooks/${id}/deliveries`)).body.deliveries as Array<Record<string, any>>;

    const firstId = await ingest(server.admin, inbox, { subject: 'before the update' });
    const first = await waitFor('the first delivery', () => receiver.to('/before')[0]);
    assert.equal(first.body.message_id, firstId);

    const disabled = await cli('webhooks', 'update', id, '--disable');
    assert.equal(disabled.code, 0, disabled.stderr);
    assert.equal(
      disabled.stdout.trim(),
      `${id}  ${receiver.url('/before')}  events=message_received  mailboxes=${inbox}  DISABLED (manual)`,
    );
    const missedId = await ingest(server.admin, inbox, { subject: 'while disabled' });
    // Deliveries are queued in the transaction of their event: a disabled endpoint got none.
    assert.equal((await deliveries()).length, 1, 'nothing is queued for a disabled endpoint');

    const updated = await cli(
      'webhooks',
      'update',
      id,
      '--enable',
      '--url',
      receiver.url('/after'),
      '--events',
      'message_received,request_created',
      '--description',
      'moved',
      '--json',
    );
    assert.equal(updated.code, 0, updated.stderr);
    const shown = await server.admin.get(`/v1/webhooks/${id}`);
    assert.deepEqual(JSON.parse(updated.stdout), shown.body, '--json prints what REST shows');
    assert.equal(shown.body.url, receiver.url('/after'));
    assert.deepEqual(shown.body.events, ['message_received', 'request_created']);
    assert.deepEqual(shown.body.mailbox_ids, [inbox], 'a field not given stays as it was');
    assert.equal(shown.body.description, 'moved');
    assert.equal(shown.body.enabled, true);
    assert.equal(shown.body.disabled_reason, null);

    const afterId = await ingest(server.admin, inbox, { subject: 'after the update' });
    const moved = await waitFor('the delivery at the new URL', () => receiver.to('/after')[0]);
    assert.equal(moved.body.message_id, afterId);
    assert.equal(receiver.to('/before').length, 1, 'the old URL gets nothing more');

    const replayed = await cli('webhooks', 'replay', id, '--since-cursor', first.body.cursor as string);
    assert.equal(replayed.code, 0, replayed.stderr);
    assert.equal(replayed.stdout.trim(), `queued 2 deliveries to ${id}: the events after cursor ${first.body.cursor}`);
    const again = await waitFor('the replayed deliveries', () => {
      const posts = receiver.to('/after');
      return posts.length === 3 ? posts.slice(1) : undefined;
    });
    assert.deepEqual(
      again.map((p) => p.body.message_id).sort(),
      [missedId, afterId].sort(),
      'the replay delivers the missed event and the one after it',
    );
    const missed = again.find((p) => p.body.message_id === missedId)!;
    assert.equal(missed.body.subject, 'while disabled');
    assert.ok(BigInt(missed.body.cursor as string) > BigInt(first.body.cursor as string));
    assert.ok(!again.some((p) => p.id === moved.id), 'a replay is a new delivery, with its own webhook-id');
    await waitFor('the replayed deliveries recorded as delivered', async () => {
      const list = await deliveries();
      return list.length === 4 && list.every((d) => d.status === 'delivered');
    });
    const actions = await server.db.query<{ action: string; subject: Record<string, unknown> }>(
      `SELECT action, subject FROM audit_log WHERE subject->>'webhook_id' = $1 ORDER BY seq`,
      [id],
    );
    assert.deepEqual(
      actions.map((a) => [a.action, a.subject.enabled]),
      [
        ['webhook_created', undefined],
        ['webhook_updated', false],
        ['webhook_updated', true],
      ],
    );
  });

  it('refuses a bad update or replay with the reason REST gives, and changes nothing', async () => {
    const created = await server.admin.post('/v1/webhooks', {
      url: receiver.url('/unchanged'),
      events: ['message_received'],
      mailbox_ids: [mailbox],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.webhook_id as string;
    const cases: Array<[string[], number, RegExp]> = [
      [['update', id, '--url', 'ftp://example.org/hook'], 1, /^error: invalid_request \(invalid_url\): /],
      [
        ['update', id, '--events', 'message_received,mail_sent', '--disable'],
        1,
        /^error: invalid_request \(unknown_event_type\): events has unknown types \(mail_sent\)/,
      ],
      [['update', 'whk_nosuchendpoint', '--disable'], 1, /^error: not_found \(webhook_not_found\): /],
      [
        ['replay', id, '--since-cursor', 'yesterday'],
        1,
        /^error: invalid_request \(invalid_field\): since_cursor must be a cursor of a delivered event \(digits\)/,
      ],
      [['update', id], 2, /^error: webhooks update needs something to change/],
      [['replay', id], 2, /^error: --since-cursor is required/],
    ];
    for (const [args, code, message] of cases) {
      const refused = await cli('webhooks', ...args);
      assert.equal(refused.code, code, `${args.join(' ')}: ${refused.stderr}`);
      assert.match(refused.stderr, message, args.join(' '));
      assert.equal(refused.stdout, '', args.join(' '));
    }
    const view = Object.fromEntries(Object.entries(created.body).filter(([key]) => key !== 'secret'));
    assert.deepEqual((await server.admin.get(`/v1/webhooks/${id}`)).body, view, 'the endpoint is as it was');
    const updates = await server.db.query(
      `SELECT 1 FROM audit_log WHERE action = 'webhook_updated' AND subject->>'webhook_id' = $1`,
      [id],
    );
    assert.equal(updates.length, 0, 'no update was recorded');
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
