import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clientIdOf, mapScopes, principalId } from '#app/auth/oauth/principal-claims.js';

/** "Who and what" (docs/operators.md, "Identity providers"): which of a token's scope claims become Alcarta scopes. */
describe('OAuth scope mapping', () => {
  const plain = { scopePrefix: '', allowAdmin: false };
  const sorted = (s: Set<string>) => [...s].sort();

  it('reads a space-separated scope claim and keeps only Alcarta scopes', () => {
    assert.deepEqual(sorted(mapScopes({ scope: 'openid mail:read  profile approvals:decide' }, plain)), [
      'approvals:decide',
      'mail:read',
    ]);
  });

  it('reads an scp array (Entra ID style), ignoring non-strings', () => {
    assert.deepEqual(sorted(mapScopes({ scp: ['mail:send', 42, 'User.Read'] }, plain)), ['mail:send']);
  });

  it('removes the prefix and ignores unprefixed values when a prefix is set', () => {
    const prefixed = { scopePrefix: 'alcarta:', allowAdmin: false };
    assert.deepEqual(sorted(mapScopes({ scope: 'alcarta:mail:read mail:send alcarta:bogus' }, prefixed)), [
      'mail:read',
    ]);
  });

  it('drops admin unless allowed', () => {
    assert.deepEqual(sorted(mapScopes({ scope: 'admin mail:read' }, plain)), ['mail:read']);
    assert.deepEqual(sorted(mapScopes({ scope: 'admin mail:read' }, { scopePrefix: '', allowAdmin: true })), [
      'admin',
      'mail:read',
    ]);
  });

  it('gives no scopes for a missing or malformed claim', () => {
    assert.deepEqual(sorted(mapScopes({}, plain)), []);
    assert.deepEqual(sorted(mapScopes({ scope: { 'mail:read': true } }, plain)), []);
  });

  it('binds a principal to a stable id per issuer and subject', () => {
    const id = principalId('https://idp.example', 'agent-7');
    assert.match(id, /^prn_[0-9A-Za-z]{22}$/);
    assert.equal(principalId('https://idp.example', 'agent-7'), id);
    assert.notEqual(principalId('https://other.example', 'agent-7'), id);
    assert.notEqual(principalId('https://idp.example', 'agent-8'), id);
  });

  it('names the client by azp, else client_id, else cid (Okta)', () => {
    assert.equal(clientIdOf({ azp: 'oidc-client', client_id: 'rfc9068-client', cid: 'okta-client' }), 'oidc-client');
    assert.equal(clientIdOf({ client_id: 'rfc9068-client', cid: 'okta-client' }), 'rfc9068-client');
    assert.equal(clientIdOf({ cid: 'okta-client' }), 'okta-client');
    assert.equal(clientIdOf({}), null);
  });

  it('skips empty and non-string client claims in favour of the next one', () => {
    assert.equal(clientIdOf({ azp: '', client_id: 'rfc9068-client' }), 'rfc9068-client');
    assert.equal(clientIdOf({ azp: 42, client_id: ['x'], cid: 'okta-client' }), 'okta-client');
    assert.equal(clientIdOf({ azp: null, client_id: '', cid: { id: 'x' } }), null);
  });
});
