import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AlcartaError } from '#app/kernel/errors.js';
import { connectionChanged, prepareSource, SourceSettings } from '#app/connected-mailboxes/source-settings.js';

const NOW = new Date('2026-12-01T10:00:00.000Z');

function input(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    kind: 'imap',
    host: 'IMAP.Example.com',
    port: 993,
    tls: 'implicit',
    username: 'ops@example.com',
    auth: { password: 'hunter2-secret' },
    ...extra,
  };
}

/** The `invalid_source` error prepareSource throws for `given`, asserted to name `field`. */
function refusal(given: unknown, field: string, stored?: SourceSettings): AlcartaError {
  let caught: unknown;
  try {
    prepareSource(given, stored, NOW);
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof AlcartaError, `expected a refusal of ${JSON.stringify(given)}, got ${String(caught)}`);
  assert.equal(caught.reason, 'invalid_source', caught.message);
  assert.equal(caught.details?.field, field, `${caught.message} names ${String(caught.details?.field)}`);
  return caught;
}

describe('prepareSource', () => {
  it('fills the defaults of a new source and keeps its secrets apart from its settings', () => {
    const { settings, secrets } = prepareSource(input(), undefined, NOW);
    assert.deepEqual(settings, {
      kind: 'imap',
      host: 'imap.example.com',
      port: 993,
      tls: 'implicit',
      username: 'ops@example.com',
      auth: { kind: 'password' },
      folders: ['INBOX'],
      sync_from: 'now',
      sync_since: NOW.toISOString(),
      smtp: null,
      save_sent: null,
      trusted_authserv_ids: [],
      paused: false,
    });
    assert.deepEqual(secrets, { password: 'hunter2-secret' });
    assert.equal(JSON.stringify(settings).includes('hunter2-secret'), false);
  });

  it('splits an XOAUTH2 account into shown settings and sealed secrets', () => {
    const xoauth2 = {
      token_url: 'https://login.example.com/token',
      client_id: 'alcarta',
      client_secret: 'client-secret-1',
      refresh_token: 'refresh-token-1',
      scope: 'https://outlook.office.com/IMAP.AccessAsUser.All',
    };
    const { settings, secrets } = prepareSource(input({ auth: { xoauth2 } }), undefined, NOW);
    assert.deepEqual(settings.auth, {
      kind: 'xoauth2',
      grant: 'refresh_token',
      token_url: xoauth2.token_url,
      client_id: 'alcarta',
      scope: xoauth2.scope,
    });
    assert.deepEqual(secrets, { client_secret: 'client-secret-1', refresh_token: 'refresh-token-1' });
    const { secrets: public_ } = prepareSource(
      input({ auth: { xoauth2: { token_url: xoauth2.token_url, client_id: 'c', refresh_token: 'r' } } }),
      undefined,
      NOW,
    );
    assert.deepEqual(public_, { client_secret: null, refresh_token: 'r' });
  });

  it('tells the XOAUTH2 grant from what is given: a refresh token, a private key, or the client secret alone', () => {
    const base = { token_url: 'https://login.example.com/token', client_id: 'c' };
    const pem = '-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n';
    const grant = (xoauth2: Record<string, unknown>) => {
      const { settings, secrets } = prepareSource(
        input({ auth: { xoauth2: { ...base, ...xoauth2 } } }),
        undefined,
        NOW,
      );
      return { grant: settings.auth.kind === 'xoauth2' ? settings.auth.grant : undefined, secrets };
    };
    assert.deepEqual(grant({ client_secret: 's' }), { grant: 'client_credentials', secrets: { client_secret: 's' } });
    assert.deepEqual(grant({ private_key: pem }), {
      grant: 'jwt_bearer',
      secrets: { client_secret: null, private_key: pem },
    });
    for (const [xoauth2, field] of [
      [{}, 'source.auth.xoauth2.refresh_token'],
      [{ refresh_token: 'r', private_key: pem }, 'source.auth.xoauth2'],
      [{ private_key: 'not a key' }, 'source.auth.xoauth2.private_key'],
    ] as const) {
      assert.throws(
        () => grant(xoauth2),
        (err: AlcartaError) => err.reason === 'invalid_source' && err.details.field === field,
        JSON.stringify(xoauth2),
      );
    }
  });

  it('takes sync_from as now (fixed when configured), all, or an RFC 3339 time', () => {
    assert.equal(prepareSource(input({ sync_from: 'now' }), undefined, NOW).settings.sync_since, NOW.toISOString());
    assert.equal(prepareSource(input({ sync_from: 'all' }), undefined, NOW).settings.sync_since, null);
    const dated = prepareSource(input({ sync_from: '2026-11-30T12:00:00+02:00' }), undefined, NOW).settings;
    assert.equal(dated.sync_from, '2026-11-30T12:00:00+02:00');
    assert.equal(dated.sync_since, '2026-11-30T10:00:00.000Z');
    refusal(input({ sync_from: 'yesterday' }), 'source.sync_from');
    refusal(input({ sync_from: '2026-11-30' }), 'source.sync_from');
    refusal(input({ sync_from: '2026-13-01T00:00:00Z' }), 'source.sync_from');
    refusal(input({ sync_from: '2026-01-01T25:00:00Z' }), 'source.sync_from');
  });

  it('merges a PATCH at the first level: given keys replace, auth is kept when omitted and replaced when given', () => {
    const stored = prepareSource(input({ folders: ['INBOX', 'Support'] }), undefined, NOW).settings;
    const later = new Date(NOW.getTime() + 3_600_000);

    const renamed = prepareSource({ folders: ['Support'], port: 143, tls: 'starttls' }, stored, later);
    assert.deepEqual(renamed.settings.folders, ['Support']);
    assert.equal(renamed.settings.port, 143);
    assert.equal(renamed.settings.tls, 'starttls');
    assert.equal(renamed.settings.host, 'imap.example.com');
    assert.equal(renamed.settings.username, 'ops@example.com');
    assert.deepEqual(renamed.settings.auth, { kind: 'password' });
    assert.equal(renamed.secrets, undefined, 'without auth the stored secrets stay');
    assert.equal(renamed.settings.sync_since, stored.sync_since, 'an unchanged sync_from keeps its start');

    const replaced = prepareSource(
      { auth: { xoauth2: { token_url: 'https://idp.example.com/t', client_id: 'c', refresh_token: 'r2' } } },
      stored,
      later,
    );
    assert.equal(replaced.settings.auth.kind, 'xoauth2');
    assert.deepEqual(replaced.secrets, { client_secret: null, refresh_token: 'r2' });

    const paused = prepareSource({ paused: true }, stored, later);
    assert.equal(paused.settings.paused, true);
    assert.equal(paused.secrets, undefined);
    assert.equal(connectionChanged(stored, paused.settings, false), false, 'pausing needs no new sign-in');
    assert.equal(connectionChanged(stored, renamed.settings, false), true);
    assert.equal(connectionChanged(stored, stored, true), true, 'new secrets are checked');

    const restarted = prepareSource({ sync_from: 'now' }, { ...stored, sync_from: 'all', sync_since: null }, later);
    assert.equal(restarted.settings.sync_since, later.toISOString());
  });

  it('clears a stored smtp or save_sent given as null in a PATCH', () => {
    const stored = prepareSource(
      input({ smtp: { host: 'smtp.example.com', port: 587, tls: 'starttls' }, save_sent: 'Sent' }),
      undefined,
      NOW,
    ).settings;
    assert.deepEqual(stored.smtp, { host: 'smtp.example.com', port: 587, tls: 'starttls' });
    const cleared = prepareSource({ smtp: null, save_sent: null }, stored, NOW).settings;
    assert.equal(cleared.smtp, null);
    assert.equal(cleared.save_sent, null);
  });

  it('refuses save_sent among the synced folders, also after a merge', () => {
    refusal(input({ folders: ['INBOX', 'Sent'], save_sent: 'Sent' }), 'source.save_sent');
    const stored = prepareSource(input({ save_sent: 'Sent' }), undefined, NOW).settings;
    refusal({ folders: ['Sent'] }, 'source.save_sent', stored);
  });

  it('refuses each malformed field, naming it', () => {
    refusal('imap://example.com', 'source');
    refusal(null, 'source');
    refusal(['imap'], 'source');
    refusal(input({ kind: 'pop3' }), 'source.kind');
    refusal(input({ host: '' }), 'source.host');
    refusal(input({ host: 7 }), 'source.host');
    refusal(input({ port: 0 }), 'source.port');
    refusal(input({ port: 65536 }), 'source.port');
    refusal(input({ port: '993' }), 'source.port');
    refusal(input({ tls: 'ssl' }), 'source.tls');
    refusal(input({ username: '' }), 'source.username');
    refusal(input({ auth: {} }), 'source.auth');
    refusal(
      input({
        auth: { password: 'a', xoauth2: { token_url: 'https://t.example', client_id: 'c', refresh_token: 'r' } },
      }),
      'source.auth',
    );
    refusal(input({ auth: { password: '' } }), 'source.auth.password');
    refusal(
      input({ auth: { xoauth2: { token_url: 'ftp://t.example', client_id: 'c', refresh_token: 'r' } } }),
      'source.auth.xoauth2.token_url',
    );
    refusal(
      input({ auth: { xoauth2: { token_url: 'https://t.example', client_id: 'c' } } }),
      'source.auth.xoauth2.refresh_token',
    );
    refusal(input({ folders: [] }), 'source.folders');
    refusal(input({ folders: 'INBOX' }), 'source.folders');
    refusal(input({ folders: ['INBOX\r\nA1 DELETE INBOX'] }), 'source.folders');
    refusal(input({ folders: ['*'] }), 'source.folders');
    refusal(input({ smtp: { host: 'smtp.example.com', port: 587 } }), 'source.smtp.tls');
    refusal(input({ save_sent: '' }), 'source.save_sent');
    refusal(input({ trusted_authserv_ids: ['mx example com'] }), 'source.trusted_authserv_ids');
    refusal(input({ paused: 'yes' }), 'source.paused');
    refusal(input({ imap_host: 'x' }), 'source.imap_host');
  });
});
