import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  insufficientScopeChallenge,
  protectedResourceMetadata,
  unauthorizedChallenge,
} from '#app/kernel/protected-resource-metadata.js';

const PUBLIC_URL = 'https://alcarta.example.com';
const ISSUER = 'https://login.example.com/realms/acme';
const AGENT_SCOPES = ['mail:read', 'mail:send', 'approvals:read'];

describe('protected-resource metadata (RFC 9728) and bearer challenges (RFC 6750)', () => {
  it('names the /mcp resource, the issuer and only the scopes an agent needs', () => {
    assert.deepEqual(protectedResourceMetadata(PUBLIC_URL, { issuer: ISSUER, scopePrefix: '' }), {
      resource: `${PUBLIC_URL}/mcp`,
      authorization_servers: [ISSUER],
      scopes_supported: AGENT_SCOPES,
      bearer_methods_supported: ['header'],
      resource_name: 'Alcarta',
    });
  });

  it('prefixes the agent scopes', () => {
    const doc = protectedResourceMetadata(PUBLIC_URL, { issuer: ISSUER, scopePrefix: 'alcarta:' });
    assert.deepEqual(
      doc.scopes_supported,
      AGENT_SCOPES.map((s) => `alcarta:${s}`),
    );
  });

  it('401 challenge: bare realm without OAuth; resource_metadata, and invalid_token only for a sent token', () => {
    for (const endpoint of ['mcp', 'rest'] as const) {
      assert.equal(
        unauthorizedChallenge({ publicUrl: PUBLIC_URL, oauth: undefined }, true, endpoint),
        'Bearer realm="alcarta"',
      );
    }
    const oauth = { issuer: ISSUER, scopePrefix: '' };
    const metadata = `resource_metadata="${PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"`;
    assert.equal(
      unauthorizedChallenge({ publicUrl: PUBLIC_URL, oauth }, false, 'rest'),
      `Bearer realm="alcarta", ${metadata}`,
    );
    assert.equal(
      unauthorizedChallenge({ publicUrl: PUBLIC_URL, oauth }, true, 'rest'),
      `Bearer realm="alcarta", ${metadata}, error="invalid_token"`,
    );
  });

  it('a 401 of /mcp names the agent scopes, prefixed, so clients ask for those alone', () => {
    const metadata = `resource_metadata="${PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"`;
    assert.equal(
      unauthorizedChallenge({ publicUrl: PUBLIC_URL, oauth: { issuer: ISSUER, scopePrefix: '' } }, false, 'mcp'),
      `Bearer realm="alcarta", ${metadata}, scope="mail:read mail:send approvals:read"`,
    );
    assert.equal(
      unauthorizedChallenge({ publicUrl: PUBLIC_URL, oauth: { issuer: ISSUER, scopePrefix: 'alcarta:' } }, true, 'mcp'),
      `Bearer realm="alcarta", ${metadata}, scope="alcarta:mail:read alcarta:mail:send alcarta:approvals:read", error="invalid_token"`,
    );
  });

  it('403 challenge lists the needed scopes, prefixed when OAuth is configured', () => {
    assert.equal(
      insufficientScopeChallenge({ publicUrl: PUBLIC_URL, oauth: undefined }, ['admin']),
      'Bearer realm="alcarta", error="insufficient_scope", scope="admin"',
    );
    const oauth = { issuer: ISSUER, scopePrefix: 'alcarta:' };
    assert.equal(
      insufficientScopeChallenge({ publicUrl: PUBLIC_URL, oauth }, ['mail:read', 'approvals:read']),
      'Bearer realm="alcarta", error="insufficient_scope", scope="alcarta:mail:read alcarta:approvals:read"',
    );
  });
});
