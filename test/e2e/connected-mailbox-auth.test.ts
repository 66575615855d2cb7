import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { MailIdentityProvider, startMailIdentityProvider } from '../support/mail-identity-provider';
import { metricValue } from '../support/metrics';
import { requireSystemPackage } from '../support/system-packages';
import { recordSecret } from '../support/test-logs';
import { startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/**
 * docs/connected-mailboxes.md, "Credentials": an account that stops accepting its credentials is
 * `auth_failed` (view, event, metrics); XOAUTH2 through Dovecot's oauth2 passdb and a real OAuth
 * server syncs mail and fails the same way once its refresh token is revoked; secrets are sealed
 * and survive a key rotation.
 */
describe('connected mailbox credentials', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let idp: MailIdentityProvider;
  let dovecot: TestDovecot;
  let server: TestServer;
  const key = secretsKey();

  before(async () => {
    idp = await startMailIdentityProvider({ accessTokenSeconds: 600 });
    dovecot = await startDovecot({ oauth2: { introspectionUrl: idp.introspectionUrl, mechanisms: ['xoauth2'] } });
    server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: key, ALCARTA_IMAP_LEASE_SECONDS: '5' } });
  });

  after(async () => {
    await server?.close();
    await dovecot?.close();
    await idp?.close();
  });

  const authFailedEvent = (mailboxId: string) =>
    waitFor(`a mailbox_source_changed event of ${mailboxId} into auth_failed`, async () => {
      const rows = await server.db.query<{ payload: Record<string, unknown> }>(
        `SELECT payload FROM events WHERE type = 'mailbox_source_changed' AND mailbox_id = $1
           AND payload->>'state' = 'auth_failed'`,
        [mailboxId],
      );
      return rows[0]?.payload;
    });

  /** Pausing and resuming makes the holder sign in again (resuming checks nothing itself). */
  async function reconnect(mailboxId: string) {
    for (const paused of [true, false]) {
      const res = await server.admin.patch(`/v1/mailboxes/${mailboxId}`, { source: { paused } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    }
  }

  it('a password the account no longer accepts: auth_failed in the view, an event and the metrics', async () => {
    const account = await dovecotAccount(dovecot);
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    await sourceReaches(server.admin, mailboxId, 'idle');
    const failuresBefore = await metricValue(server.url, 'alcarta_imap_auth_failures_total');

    await dovecot.addUser(account.username, `${account.password}-rotated`);
    await reconnect(mailboxId);
    const view = await sourceReaches(server.admin, mailboxId, 'auth_failed');
    assert.equal(typeof view.last_error, 'string');
    assert.equal(String(view.last_error).includes(account.password), false);
    const event = await authFailedEvent(mailboxId);
    assert.equal(event.mailbox_id, mailboxId);
    assert.equal(typeof event.previous_state, 'string');
    assert.equal(JSON.stringify(event).includes(account.password), false);
    await waitFor('the auth failure in the metrics', async () =>
      (await metricValue(server.url, 'alcarta_imap_auth_failures_total')) > failuresBefore &&
      (await metricValue(server.url, 'alcarta_imap_connections', { state: 'auth_failed' })) >= 1
        ? true
        : undefined,
    );

    // The operator gives the new password: checked, stored, and the source syncs again.
    const fixed = await server.admin.patch(`/v1/mailboxes/${mailboxId}`, {
      source: { auth: { password: `${account.password}-rotated` } },
    });
    assert.equal(fixed.status, 200, JSON.stringify(fixed.body));
    await sourceReaches(server.admin, mailboxId, 'idle');
  });

  it('XOAUTH2: syncs mail with access tokens from the refresh token; a revoked refresh token is auth_failed', async () => {
    const account = await dovecotAccount(dovecot);
    const refreshToken = await idp.refreshTokenFor(account.username);
    recordSecret('refresh token', refreshToken);
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account, {
        auth: {
          xoauth2: {
            token_url: idp.tokenUrl,
            client_id: idp.clientId,
            client_secret: idp.clientSecret,
            refresh_token: refreshToken,
            scope: idp.scope,
          },
        },
      }),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    assert.deepEqual(created.body.source.auth, {
      kind: 'xoauth2',
      grant: 'refresh_token',
      token_url: idp.tokenUrl,
      client_id: idp.clientId,
      scope: idp.scope,
    });
    for (const secret of [refreshToken, idp.clientSecret]) {
      assert.equal(JSON.stringify(created.body).includes(secret), false, 'no secret in the view');
    }
    const [row] = await server.db.query<{ sealed_secrets: string }>(
      'SELECT sealed_secrets FROM mailbox_sources WHERE mailbox_id = $1',
      [mailboxId],
    );
    assert.equal(row.sealed_secrets.includes(refreshToken), false, 'the refresh token is stored sealed');
    assert.equal(row.sealed_secrets.includes(idp.clientSecret), false);

    await sourceReaches(server.admin, mailboxId, 'idle');
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'Over XOAUTH2' }));
    await waitFor('the message synced over XOAUTH2', async () => {
      const rows = await server.db.query('SELECT 1 FROM messages WHERE mailbox_id = $1', [mailboxId]);
      return rows.length === 1 ? true : undefined;
    });
    assert.ok(idp.grants.some((g) => g.grant_type === 'refresh_token' && g.status === 200));

    await idp.revoke(refreshToken);
    // A cached access token would still sign in until it expires, but it is inactive once revoked.
    await reconnect(mailboxId);
    const view = await sourceReaches(server.admin, mailboxId, 'auth_failed');
    assert.equal(JSON.stringify(view).includes(refreshToken), false);
    await authFailedEvent(mailboxId);
    const tested = await server.admin.post(`/v1/mailboxes/${mailboxId}/source/test`);
    assert.equal(tested.body.ok, false, JSON.stringify(tested.body));
    assert.equal(tested.body.stage, 'auth');
  });

  it('key rotation: a restart with a new key and the old one as previous still signs in, and re-seals', async () => {
    const account = await dovecotAccount(dovecot);
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    await sourceReaches(server.admin, mailboxId, 'idle');
    const sealed = async () =>
      (
        await server.db.query<{ sealed_secrets: string }>(
          'SELECT sealed_secrets FROM mailbox_sources WHERE mailbox_id = $1',
          [mailboxId],
        )
      )[0].sealed_secrets;
    const sealedWithOld = await sealed();

    const { db, adminToken } = server;
    await server.close({ keepDatabase: true });
    server = await startTestServer({
      db,
      adminToken,
      env: { ALCARTA_SECRETS_KEY: secretsKey(), ALCARTA_SECRETS_KEY_PREVIOUS: key, ALCARTA_IMAP_LEASE_SECONDS: '5' },
    });
    const tested = await server.admin.post(`/v1/mailboxes/${mailboxId}/source/test`);
    assert.equal(tested.status, 200, JSON.stringify(tested.body));
    assert.equal(tested.body.ok, true, JSON.stringify(tested.body));
    await sourceReaches(server.admin, mailboxId, 'idle');
    const resealed = await sealed();
    assert.notEqual(resealed, sealedWithOld, 'the secrets are sealed again with the current key');
    assert.equal(resealed.includes(account.password), false);

    // The source keeps syncing under the new key.
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'After rotation' }));
    await waitFor('mail synced after the rotation', async () => {
      const rows = await server.db.query('SELECT 1 FROM messages WHERE mailbox_id = $1', [mailboxId]);
      return rows.length === 1 ? true : undefined;
    });
  });
});
