import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  insufficientScopeChallenge,
  protectedResourceMetadata,
  unauthorizedChallenge,
} from '#app/auth/protected-resource-metadata.js';

const PUBLIC_URL = 'https://alcarta.example.com';
const ISSUER = 'https://login.example.com/realms/acme';
const NON_ADMIN = ['mail:read', 'mail:send', 'approvals:read', 'approvals:decide', 'mail:ingest'];

describe('protected-resource metadata (RFC 9728) and bearer challenges (RFC 6750)', () => {
  it('names the /mcp resource, the issuer and every scope but admin', () => {
    assert.deepEqual(protectedResourceMetadata(PUBLIC_URL, { issuer: ISSUER, scopePrefix: '', allowAdmin: false }), {
      resource: `${PUBLIC_URL}/mcp`,
      authorization_servers: [ISSUER],
      scopes_supported: NON_ADMIN,
      bearer_methods_supported: ['header'],
      resource_name: 'Alcarta',
    });
  });

  it('prefixes the scopes and offers admin only when allowed', () => {
    const doc = protectedResourceMetadata(PUBLIC_URL, { issuer: ISSUER, scopePrefix: 'alcarta:', allowAdmin: true });
    assert.deepEqual(
      doc.scopes_supported,
      [...NON_ADMIN, 'admin'].map((s) => `alcarta:${s}`),
    );
  });

  it('401 challenge: bare realm without OAuth; resource_metadata, and invalid_token only for a sent token', () => {
    assert.equal(unauthorizedChallenge({ publicUrl: PUBLIC_URL, oauth: undefined }, true), 'Bearer realm="alcarta"');
    const oauth = { issuer: ISSUER, scopePrefix: '', allowAdmin: false };
    const metadata = `resource_metadata="${PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"`;
    assert.equal(unauthorizedChallenge({ publicUrl: PUBLIC_URL, oauth }, false), `Bearer realm="alcarta", ${metadata}`);
    assert.equal(
      unauthorizedChallenge({ publicUrl: PUBLIC_URL, oauth }, true),
      `Bearer realm="alcarta", ${metadata}, error="invalid_token"`,
    );
  });

  it('403 challenge lists the needed scopes, prefixed when OAuth is configured', () => {
    assert.equal(
      insufficientScopeChallenge({ publicUrl: PUBLIC_URL, oauth: undefined }, ['admin']),
      'Bearer realm="alcarta", error="insufficient_scope", scope="admin"',
    );
    const oauth = { issuer: ISSUER, scopePrefix: 'alcarta:', allowAdmin: false };
    assert.equal(
      insufficientScopeChallenge({ publicUrl: PUBLIC_URL, oauth }, ['mail:read', 'approvals:read']),
      'Bearer realm="alcarta", error="insufficient_scope", scope="alcarta:mail:read alcarta:approvals:read"',
    );
  });
});
