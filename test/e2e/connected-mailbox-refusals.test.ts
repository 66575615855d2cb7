import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { freePort } from '#app/common/net.js';
import { dovecotAccount, imapSource, secretsKey } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { requireSystemPackage } from '../support/system-packages';
import { startTestServer, TestServer } from '../support/test-server';

/**
 * docs/connected-mailboxes.md, "Configuring": a source that cannot be used is refused with a
 * reason an operator can act on, and nothing is stored: no mailbox, no source, no changed source.
 */
describe('connected mailbox refusals', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let dovecot: TestDovecot;
  let server: TestServer;
  let account: { username: string; password: string };

  before(async () => {
    dovecot = await startDovecot();
    // A port that answers nothing in the expected protocol fails by its greeting timeout: keep it short.
    server = await startTestServer({
      env: { ALCARTA_SECRETS_KEY: secretsKey(), ALCARTA_IMAP_CONNECT_TIMEOUT_SECONDS: '2' },
    });
    account = await dovecotAccount(dovecot);
    await dovecot.createFolder(account.username, 'Sent');
  });

  after(async () => {
    await server?.close();
    await dovecot?.close();
  });

  const counts = async (db = server.db) => {
    const [row] = await db.query<{ mailboxes: string; sources: string; events: string }>(
      `SELECT (SELECT count(*) FROM mailboxes) AS mailboxes, (SELECT count(*) FROM mailbox_sources) AS sources,
              (SELECT count(*) FROM events WHERE type = 'mailbox_source_changed') AS events`,
    );
    return row;
  };

  /** Creating a mailbox with `source` is a 400 of `reason` (its message mentioning `mentions`), and stores nothing. */
  async function refused(source: Record<string, unknown>, reason: string, mentions?: RegExp) {
    const before = await counts();
    const res = await server.admin.post('/v1/mailboxes', { address: account.username, source });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.error, 'invalid_request');
    assert.equal(res.body.reason, reason, JSON.stringify(res.body));
    if (mentions) assert.match(res.body.message, mentions);
    assert.equal(JSON.stringify(res.body).includes(account.password), false, 'the password is never echoed');
    assert.deepEqual(await counts(), before, 'nothing is stored');
    return res.body as { message: string; stage?: string; field?: string };
  }

  it('an unreachable host: a closed loopback port', async () => {
    const closed = await freePort();
    const body = await refused(imapSource(dovecot, account, { port: closed }), 'source_unreachable', /ECONNREFUSED/);
    assert.equal(body.stage, 'connect');
  });

  it('the wrong port: the submission port for IMAP', async () => {
    // An SMTP greeting is no IMAP greeting: to the client it looks like a port waiting for TLS.
    await refused(
      imapSource(dovecot, account, { port: dovecot.submissionPort }),
      'source_tls_failed',
      /no IMAP greeting.*IMAP port/,
    );
  });

  it('TLS from the first byte against the plain IMAP port', async () => {
    const body = await refused(imapSource(dovecot, account, { tls: 'implicit' }), 'source_tls_failed', /tls/i);
    assert.equal(body.stage, 'tls');
  });

  it('no TLS, or STARTTLS, against the IMAPS port', async () => {
    for (const tls of ['none', 'starttls']) {
      const body = await refused(
        imapSource(dovecot, account, { port: dovecot.imapsPort, tls }),
        'source_tls_failed',
        /implicit/,
      );
      assert.equal(body.stage, 'tls');
    }
  });

  it('TLS to a server whose certificate this server does not trust', async () => {
    const body = await refused(
      imapSource(dovecot, account, { port: dovecot.imapsPort, tls: 'implicit' }),
      'source_tls_failed',
    );
    assert.equal(body.stage, 'tls');
  });

  it('a wrong password', async () => {
    const body = await refused(
      imapSource(dovecot, account, { auth: { password: `${account.password}-wrong` } }),
      'source_auth_failed',
    );
    assert.equal(body.stage, 'auth');
  });

  it('a folder the account does not have, synced or for sent mail', async () => {
    const body = await refused(
      imapSource(dovecot, account, { folders: ['INBOX', 'Nonexistent'] }),
      'source_folder_missing',
      /Nonexistent/,
    );
    assert.equal(body.stage, 'folder');
    await refused(imapSource(dovecot, account, { save_sent: 'Sent Items' }), 'source_folder_missing', /Sent Items/);
  });

  it('an unreachable submission server', async () => {
    const closed = await freePort();
    const body = await refused(
      imapSource(dovecot, account, { smtp: { host: '127.0.0.1', port: closed, tls: 'none' }, save_sent: 'Sent' }),
      'source_smtp_failed',
    );
    assert.equal(body.stage, 'smtp');
  });

  it('malformed fields, each named', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...imapSource(dovecot, account), kind: 'pop3' }, 'source.kind'],
      [imapSource(dovecot, account, { port: 'imap' }), 'source.port'],
      [imapSource(dovecot, account, { tls: 'ssl' }), 'source.tls'],
      [imapSource(dovecot, account, { auth: {} }), 'source.auth'],
      [imapSource(dovecot, account, { folders: [] }), 'source.folders'],
      [imapSource(dovecot, account, { sync_from: 'last week' }), 'source.sync_from'],
      [imapSource(dovecot, account, { sync_from: '2026-13-01T00:00:00Z' }), 'source.sync_from'],
      [imapSource(dovecot, account, { save_sent: 'INBOX' }), 'source.save_sent'],
      [imapSource(dovecot, account, { trusted_authserv_ids: 'mx.example.com' }), 'source.trusted_authserv_ids'],
      [imapSource(dovecot, account, { password: 'misplaced' }), 'source.password'],
    ];
    for (const [source, field] of cases) {
      const body = await refused(source, 'invalid_source');
      assert.equal(body.field, field, JSON.stringify(body));
      assert.match(body.message, new RegExp(field.replace(/^source\./, '').split('.')[0]));
    }
    const notAnObject = await server.admin.post('/v1/mailboxes', { address: account.username, source: 'imap' });
    assert.equal(notAnObject.status, 400, JSON.stringify(notAnObject.body));
  });

  it('a PATCH that cannot sign in changes nothing', async () => {
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.mailbox_id as string;
    const stored = () =>
      server.db.query('SELECT settings, sealed_secrets, revision FROM mailbox_sources WHERE mailbox_id = $1', [id]);
    const before = await stored();
    for (const [change, reason] of [
      [{ auth: { password: 'not-it' } }, 'source_auth_failed'],
      [{ folders: ['Missing'] }, 'source_folder_missing'],
      [{ port: dovecot.imapsPort }, 'source_tls_failed'],
    ] as const) {
      const res = await server.admin.patch(`/v1/mailboxes/${id}`, { name: 'renamed', source: change });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.reason, reason);
      assert.deepEqual(await stored(), before);
      assert.equal((await server.admin.get(`/v1/mailboxes/${id}`)).body.name, null, 'the name is not changed either');
    }
    await server.admin.patch(`/v1/mailboxes/${id}`, { source: null });
  });

  it('without ALCARTA_SECRETS_KEY: secrets_key_missing, nothing stored', async () => {
    const keyless = await startTestServer();
    try {
      const before = await counts(keyless.db);
      const res = await keyless.admin.post('/v1/mailboxes', {
        address: account.username,
        source: imapSource(dovecot, account),
      });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.reason, 'secrets_key_missing');
      assert.match(res.body.message, /ALCARTA_SECRETS_KEY/);
      assert.deepEqual(await counts(keyless.db), before);
      // A mailbox without a source needs no key.
      const plain = await keyless.admin.post('/v1/mailboxes', { address: account.username });
      assert.equal(plain.status, 201, JSON.stringify(plain.body));
    } finally {
      await keyless.close();
    }
  });
});
