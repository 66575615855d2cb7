import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

interface SourceEvent {
  state: string;
  previous_state: string | null;
  last_error: string | null;
}

/**
 * docs/connected-mailboxes.md, "Configuring": a connected account through REST against Debian's
 * Dovecot: the view never shows a secret, PATCH merges onto the stored source, pausing and resuming
 * are states with events, `source: null` disconnects and keeps the mail, `source/test` answers both
 * ways, and only admins of the mailbox reach any of it.
 */
describe('connected mailbox configuration', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let dovecot: TestDovecot;
  let server: TestServer;

  before(async () => {
    dovecot = await startDovecot();
    server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: secretsKey(), ALCARTA_IMAP_LEASE_SECONDS: '5' } });
  });

  after(async () => {
    await server?.close();
    await dovecot?.close();
  });

  const sourceEvents = (mailboxId: string) =>
    server.db
      .query<{ payload: SourceEvent }>(
        `SELECT payload FROM events WHERE type = 'mailbox_source_changed' AND mailbox_id = $1 ORDER BY id`,
        [mailboxId],
      )
      .then((rows) => rows.map((r) => r.payload));

  /** Waits for a `mailbox_source_changed` event of the mailbox into `state`. */
  const eventInto = (mailboxId: string, state: string) =>
    waitFor(`a mailbox_source_changed event of ${mailboxId} into ${state}`, async () =>
      (await sourceEvents(mailboxId)).find((e) => e.state === state),
    );

  async function connected() {
    const account = await dovecotAccount(dovecot);
    const res = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      name: 'Support',
      source: imapSource(dovecot, account),
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return { account, mailboxId: res.body.mailbox_id as string, created: res.body as Record<string, any> };
  }

  it('creates a connected mailbox whose view, one or listed, shows the source and its state but no secret', async () => {
    const { account, mailboxId, created } = await connected();
    assert.deepEqual(
      { ...created.source, state: undefined, last_sync_at: undefined, lag_seconds: undefined },
      {
        kind: 'imap',
        host: '127.0.0.1',
        port: dovecot.imapPort,
        tls: 'none',
        username: account.username,
        auth: { kind: 'password' },
        folders: ['INBOX'],
        sync_from: 'now',
        smtp: null,
        save_sent: null,
        trusted_authserv_ids: [],
        paused: false,
        state: undefined,
        last_sync_at: undefined,
        last_error: null,
        lag_seconds: undefined,
      },
    );
    assert.equal(created.source.state, 'connecting');
    assert.equal(created.address, account.username);
    assert.equal(created.name, 'Support');

    const idle = await sourceReaches(server.admin, mailboxId, 'idle');
    assert.equal(idle.lag_seconds, 0);
    assert.match(String(idle.last_sync_at), /^\d{4}-\d{2}-\d{2}T/);
    const listed = await server.admin.get('/v1/mailboxes');
    assert.equal(listed.status, 200);
    const mine = listed.body.mailboxes.find((m: { mailbox_id: string }) => m.mailbox_id === mailboxId);
    assert.equal(mine.source.state, 'idle');
    assert.deepEqual(mine.source.auth, { kind: 'password' });
    for (const body of [created, idle, listed.body]) {
      assert.equal(JSON.stringify(body).includes(account.password), false, 'the password is never shown');
    }
    const [row] = await server.db.query<{ sealed_secrets: string; settings: object }>(
      'SELECT sealed_secrets, settings FROM mailbox_sources WHERE mailbox_id = $1',
      [mailboxId],
    );
    assert.equal(row.sealed_secrets.includes(account.password), false, 'the password is stored sealed');
    assert.equal(JSON.stringify(row.settings).includes(account.password), false);
    const events = await sourceEvents(mailboxId);
    assert.deepEqual(events[0], { ...events[0], state: 'connecting', previous_state: null });
    assert.ok(
      events.some((e) => e.state === 'idle' && e.previous_state === 'connecting'),
      JSON.stringify(events),
    );
    assert.equal(JSON.stringify(events).includes(account.password), false);
  });

  it('merges a PATCH onto the stored source (auth kept), pauses with an event and resumes', async () => {
    const { account, mailboxId } = await connected();
    await sourceReaches(server.admin, mailboxId, 'idle');
    await dovecot.createFolder(account.username, 'Support');

    const merged = await server.admin.patch(`/v1/mailboxes/${mailboxId}`, {
      name: 'Support desk',
      source: { folders: ['INBOX', 'Support'], trusted_authserv_ids: ['MX.Example.com'] },
    });
    assert.equal(merged.status, 200, JSON.stringify(merged.body));
    assert.equal(merged.body.name, 'Support desk');
    assert.deepEqual(merged.body.source.folders, ['INBOX', 'Support']);
    assert.deepEqual(merged.body.source.trusted_authserv_ids, ['mx.example.com']);
    assert.deepEqual(merged.body.source.auth, { kind: 'password' }, 'auth is kept when the PATCH omits it');
    assert.equal(merged.body.source.username, account.username);
    assert.equal(merged.body.source.port, dovecot.imapPort);
    await sourceReaches(server.admin, mailboxId, 'idle');
    const folders = await server.db.query<{ folder: string }>(
      'SELECT folder FROM mailbox_source_folders WHERE mailbox_id = $1 ORDER BY folder',
      [mailboxId],
    );
    assert.deepEqual(
      folders.map((f) => f.folder),
      ['INBOX', 'Support'],
    );

    const paused = await server.admin.patch(`/v1/mailboxes/${mailboxId}`, { source: { paused: true } });
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.equal(paused.body.source.state, 'paused');
    assert.equal(paused.body.source.paused, true);
    assert.deepEqual(paused.body.source.folders, ['INBOX', 'Support'], 'pausing keeps the rest');
    const pauseEvent = await eventInto(mailboxId, 'paused');
    assert.equal(pauseEvent.previous_state, 'idle');
    // While paused no holder writes a state: it stays paused.
    assert.equal((await server.admin.get(`/v1/mailboxes/${mailboxId}`)).body.source.state, 'paused');

    const resumed = await server.admin.patch(`/v1/mailboxes/${mailboxId}`, { source: { paused: false } });
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.source.paused, false);
    assert.notEqual(resumed.body.source.state, 'paused');
    await sourceReaches(server.admin, mailboxId, 'idle');
    const events = await sourceEvents(mailboxId);
    const afterPause = events.slice(events.findIndex((e) => e.state === 'paused') + 1);
    assert.equal(afterPause[0]?.previous_state, 'paused', JSON.stringify(events));
  });

  it('source/test answers with the folders, or with the stage and reason of a failure, and changes nothing', async () => {
    const { account, mailboxId } = await connected();
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'One' }));
    const ok = await server.admin.post(`/v1/mailboxes/${mailboxId}/source/test`);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual(ok.body, { ok: true, imap: { folders: [{ name: 'INBOX', messages: 1 }] } });

    const [before] = await server.db.query('SELECT * FROM mailbox_sources WHERE mailbox_id = $1', [mailboxId]);
    await dovecot.addUser(account.username, `${account.password}-changed`);
    const failed = await server.admin.post(`/v1/mailboxes/${mailboxId}/source/test`);
    assert.equal(failed.status, 200, JSON.stringify(failed.body));
    assert.equal(failed.body.ok, false);
    assert.equal(failed.body.stage, 'auth');
    assert.equal(failed.body.reason, 'source_auth_failed');
    assert.equal(typeof failed.body.message, 'string');
    assert.equal(JSON.stringify(failed.body).includes(account.password), false);
    const [afterTest] = await server.db.query('SELECT * FROM mailbox_sources WHERE mailbox_id = $1', [mailboxId]);
    assert.deepEqual(
      { ...afterTest, state: undefined, last_error: undefined, last_sync_at: undefined, behind_since: undefined },
      { ...before, state: undefined, last_error: undefined, last_sync_at: undefined, behind_since: undefined },
      'the test stores nothing',
    );

    const plain = await createMailbox(server.admin);
    const none = await server.admin.post(`/v1/mailboxes/${plain}/source/test`);
    assert.equal(none.status, 400, JSON.stringify(none.body));
    assert.equal(none.body.reason, 'no_source');
  });

  it('source: null disconnects the account; its mail stays', async () => {
    const { account, mailboxId } = await connected();
    await sourceReaches(server.admin, mailboxId, 'idle');
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'Kept' }));
    const messages = () =>
      server.db.query<{ subject: string }>('SELECT subject FROM messages WHERE mailbox_id = $1', [mailboxId]);
    await waitFor('the synced message', async () => ((await messages()).length === 1 ? true : undefined));

    const res = await server.admin.patch(`/v1/mailboxes/${mailboxId}`, { source: null });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.source, undefined);
    assert.equal((await server.admin.get(`/v1/mailboxes/${mailboxId}`)).body.source, undefined);
    for (const table of ['mailbox_sources', 'mailbox_source_folders']) {
      const rows = await server.db.query(`SELECT 1 FROM ${table} WHERE mailbox_id = $1`, [mailboxId]);
      assert.equal(rows.length, 0, `${table} keeps nothing of the disconnected account`);
    }
    assert.deepEqual(
      (await messages()).map((m) => m.subject),
      ['Kept'],
    );
    // Mail arriving in the account after the disconnect no longer reaches the mailbox.
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'Not synced' }));
    const reconnected = await server.admin.patch(`/v1/mailboxes/${mailboxId}`, {
      source: imapSource(dovecot, account),
    });
    assert.equal(reconnected.status, 200, JSON.stringify(reconnected.body));
    await sourceReaches(server.admin, mailboxId, 'idle');
    assert.deepEqual(
      (await messages()).map((m) => m.subject),
      ['Kept'],
      'a reconnected source starts from now',
    );
  });

  it('only admins of the mailbox see, change or test its source', async () => {
    const { mailboxId } = await connected();
    const other = await createMailbox(server.admin);
    const reader = server.admin.withToken(
      (await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] })).secret,
    );
    const elsewhere = server.admin.withToken(
      (await createToken(server.admin, { scopes: ['admin'], mailboxes: [other] })).secret,
    );
    const attempts = [
      (c: typeof reader) => c.patch(`/v1/mailboxes/${mailboxId}`, { source: { paused: true } }),
      (c: typeof reader) => c.post(`/v1/mailboxes/${mailboxId}/source/test`),
      (c: typeof reader) => c.patch(`/v1/mailboxes/${mailboxId}`, { source: null }),
    ];
    for (const attempt of attempts) {
      assert.equal((await attempt(reader)).status, 403);
      const hidden = await attempt(elsewhere);
      assert.equal(hidden.status, 404, JSON.stringify(hidden.body));
    }
    assert.equal((await elsewhere.get(`/v1/mailboxes/${mailboxId}`)).status, 404);
    const listed = await elsewhere.get('/v1/mailboxes');
    assert.deepEqual(
      listed.body.mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id),
      [other],
    );
    const [row] = await server.db.query<{ paused: boolean }>(
      `SELECT (settings->>'paused')::boolean AS paused FROM mailbox_sources WHERE mailbox_id = $1`,
      [mailboxId],
    );
    assert.equal(row.paused, false, 'nothing was changed');
  });
});
