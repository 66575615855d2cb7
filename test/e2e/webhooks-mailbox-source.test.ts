import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dovecotAccount, imapSource, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { dovecotMissing, startDovecot, TestDovecot } from '../support/dovecot';
import { startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/** How long a state change may take: a reconnect backs off up to 2 s, a connection attempt 3 s. */
const RECOVERY_MS = 30_000;

/**
 * docs/webhooks.md, "Events": `mailbox_source_changed` POSTed to an endpoint as the event log holds
 * it plus `cursor`, for a connected account on Debian's Dovecot going idle, unreachable while
 * Dovecot is down, and idle again. (The other four types: webhooks.test.ts.)
 */
describe('webhooks of connected accounts', { skip: dovecotMissing() }, () => {
  let dovecot: TestDovecot;
  let receiver: WebhookReceiver;
  let server: TestServer;

  before(async () => {
    dovecot = await startDovecot();
    receiver = await WebhookReceiver.start();
    server = await startTestServer({
      env: {
        ALCARTA_SECRETS_KEY: secretsKey(),
        ALCARTA_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
        ALCARTA_IMAP_RETRY_MAX_SECONDS: '2',
        ALCARTA_IMAP_CONNECT_TIMEOUT_SECONDS: '3',
      },
    });
  });

  after(async () => {
    await server?.close();
    await receiver?.close();
    await dovecot?.close();
  });

  /** The mailbox's `mailbox_source_changed` events in the event log, oldest first. */
  const loggedEvents = (mailboxId: string) =>
    server.db.query<{ cursor: string; payload: Record<string, unknown> }>(
      `SELECT id::text AS cursor, payload FROM events WHERE type = 'mailbox_source_changed' AND mailbox_id = $1 ORDER BY id`,
      [mailboxId],
    );

  it('POSTs every mailbox_source_changed (idle, unreachable while Dovecot is down, idle again) as the event log holds it', async () => {
    // On every mailbox and made first: the endpoint sees the account's very first state too.
    const created = await server.admin.post('/v1/webhooks', {
      url: receiver.url('/sources'),
      events: ['mailbox_source_changed'],
      mailbox_ids: ['*'],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    receiver.expectSecrets('/sources', created.body.secret as string);

    const account = await dovecotAccount(dovecot);
    const mailbox = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(mailbox.status, 201, JSON.stringify(mailbox.body));
    const mailboxId = mailbox.body.mailbox_id as string;
    await sourceReaches(server.admin, mailboxId, 'idle', RECOVERY_MS);
    await dovecot.stop();
    await sourceReaches(server.admin, mailboxId, 'unreachable', RECOVERY_MS);
    await dovecot.start();
    await sourceReaches(server.admin, mailboxId, 'idle', RECOVERY_MS);

    // Every event the log holds for the mailbox, and nothing else, reaches the endpoint.
    const { logged, posts } = await waitFor(
      'a POST for every mailbox_source_changed event',
      async () => {
        const events = await loggedEvents(mailboxId);
        const received = receiver.to('/sources').filter((p) => p.body.mailbox_id === mailboxId);
        const distinct = (cursors: string[]) => JSON.stringify([...new Set(cursors)].sort());
        const sameCursors =
          distinct(events.map((e) => e.cursor)) === distinct(received.map((p) => p.body.cursor as string));
        return sameCursors ? { logged: events, posts: received } : undefined;
      },
      { timeoutMs: RECOVERY_MS },
    );
    for (const event of logged) {
      const post = posts.find((p) => p.body.cursor === event.cursor)!;
      assert.equal(post.body.type, 'mailbox_source_changed');
      assert.match(post.id, /^whd_/);
      assert.deepEqual(post.body, { ...event.payload, cursor: event.cursor });
    }
    const changes = logged.map((e) => `${String(e.payload.previous_state)}->${String(e.payload.state)}`);
    const wentDown = changes.findIndex((c) => c.endsWith('->unreachable'));
    assert.ok(wentDown > 0, `idle, then unreachable: ${JSON.stringify(changes)}`);
    assert.ok(
      changes.slice(0, wentDown).some((c) => c.endsWith('->idle')),
      JSON.stringify(changes),
    );
    assert.ok(
      changes.slice(wentDown + 1).some((c) => c.endsWith('->idle')),
      JSON.stringify(changes),
    );
    const down = posts.find((p) => p.body.cursor === logged[wentDown].cursor)!;
    assert.equal(typeof down.body.last_error, 'string', JSON.stringify(down.body));
    assert.equal(typeof down.body.changed_at, 'string');
  });
});
