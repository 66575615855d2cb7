import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
  selectResourceURL,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { freePort } from '#app/common/net.js';
import { rawMcp } from '../support/mcp';
import { createToken, randomSecret, startTestServer, TestServer } from '../support/test-server';

/**
 * "Discovery (RFC 9728)" (docs/operators.md, "Identity providers"): the protected-resource metadata
 * document, the WWW-Authenticate challenge of every 401 (REST and /mcp) and of a REST 403 for a
 * missing scope, and the official MCP SDK finding the authorization server from a 401. No IdP is
 * needed: discovery only names it.
 */
const LIST_TOOLS = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const AGENT_SCOPES = ['mail:read', 'mail:send', 'approvals:read'];
const PATHS = ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp'];

describe('OAuth discovery (RFC 9728) and bearer challenges', () => {
  let issuer: string;
  let oauthServer: TestServer;
  let prefixedServer: TestServer;
  let plainServer: TestServer;

  before(async () => {
    issuer = `http://127.0.0.1:${await freePort()}/realms/acme`;
    [oauthServer, prefixedServer, plainServer] = await Promise.all([
      startTestServer({ ownPublicUrl: true, env: { ALCARTA_OAUTH_ISSUER: issuer } }),
      startTestServer({
        ownPublicUrl: true,
        env: {
          ALCARTA_OAUTH_ISSUER: issuer,
          ALCARTA_OAUTH_SCOPE_PREFIX: 'alcarta:',
          ALCARTA_OAUTH_ALLOW_ADMIN: 'true',
        },
      }),
      startTestServer(),
    ]);
  });

  after(async () => {
    await Promise.all([oauthServer?.close(), prefixedServer?.close(), plainServer?.close()]);
  });

  it('serves the metadata document at both paths without a token, readable from any origin', async () => {
    for (const path of PATHS) {
      const res = await fetch(`${oauthServer.url}${path}`, { headers: { origin: 'https://inspector.example' } });
      assert.equal(res.status, 200, path);
      assert.equal(res.headers.get('access-control-allow-origin'), '*', path);
      assert.deepEqual(
        await res.json(),
        {
          resource: `${oauthServer.url}/mcp`,
          authorization_servers: [issuer],
          scopes_supported: AGENT_SCOPES,
          bearer_methods_supported: ['header'],
          resource_name: 'Alcarta',
        },
        path,
      );
    }
  });

  it('answers the CORS preflight the SDK header (MCP-Protocol-Version) causes, for any origin', async () => {
    for (const path of PATHS) {
      const res = await fetch(`${oauthServer.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://inspector.example',
          'access-control-request-method': 'GET',
          'access-control-request-headers': 'mcp-protocol-version',
        },
      });
      assert.equal(res.status, 204, path);
      assert.equal(res.headers.get('access-control-allow-origin'), '*', path);
      assert.match(res.headers.get('access-control-allow-headers') ?? '', /mcp-protocol-version/i, path);
      assert.match(res.headers.get('access-control-allow-methods') ?? '', /GET/, path);
    }
  });

  it('applies the scope prefix and offers no scope beyond the agent ones, even with ALCARTA_OAUTH_ALLOW_ADMIN=true', async () => {
    for (const path of PATHS) {
      const res = await fetch(`${prefixedServer.url}${path}`);
      const doc: any = await res.json();
      assert.deepEqual(
        doc.scopes_supported,
        AGENT_SCOPES.map((s) => `alcarta:${s}`),
        path,
      );
    }
  });

  it('answers 404 not_found at both paths when OAuth is not configured', async () => {
    for (const path of PATHS) {
      const res = await fetch(`${plainServer.url}${path}`);
      assert.equal(res.status, 404, path);
      assert.equal(((await res.json()) as any).error, 'not_found', path);
    }
  });

  it('every 401 on REST and /mcp names the metadata, /mcp also the agent scopes; invalid_token only when a token was sent', async () => {
    const metadata = `resource_metadata="${oauthServer.url}/.well-known/oauth-protected-resource/mcp"`;
    const scope = `scope="${AGENT_SCOPES.join(' ')}"`;
    const revoked = await createToken(oauthServer.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
    assert.equal((await oauthServer.admin.delete(`/v1/tokens/${revoked.id}`)).status, 204);
    const cases: Array<[string, Record<string, string>, boolean]> = [
      ['no Authorization header', {}, false],
      ['a non-bearer scheme', { authorization: 'Basic dXNlcjpwYXNz' }, false],
      ['an unknown token', { authorization: `Bearer ${randomSecret()}` }, true],
      ['a malformed JWT-like token', { authorization: 'Bearer eyJhbGciOiJub25lIn0.e30.' }, true],
      ['a revoked token', { authorization: `Bearer ${revoked.secret}` }, true],
    ];
    for (const [what, headers, sent] of cases) {
      const error = sent ? ', error="invalid_token"' : '';
      const rest = await fetch(`${oauthServer.url}/v1/requests`, { headers });
      assert.equal(rest.status, 401, `${what} on REST`);
      assert.equal(
        rest.headers.get('www-authenticate'),
        `Bearer realm="alcarta", ${metadata}${error}`,
        `${what} on REST`,
      );
      const mcp = await rawMcp(oauthServer.url, undefined, LIST_TOOLS, headers);
      assert.equal(mcp.status, 401, `${what} on /mcp`);
      assert.equal(
        mcp.headers.get('www-authenticate'),
        `Bearer realm="alcarta", ${metadata}, ${scope}${error}`,
        `${what} on /mcp`,
      );
    }
  });

  it('keeps the bare challenge without OAuth', async () => {
    const rest = await fetch(`${plainServer.url}/v1/requests`, {
      headers: { authorization: `Bearer ${randomSecret()}` },
    });
    assert.equal(rest.headers.get('www-authenticate'), 'Bearer realm="alcarta"');
    const mcp = await rawMcp(plainServer.url, undefined, LIST_TOOLS);
    assert.equal(mcp.headers.get('www-authenticate'), 'Bearer realm="alcarta"');
  });

  it('a REST 403 for a missing scope carries insufficient_scope with the needed scopes', async () => {
    const probes: Array<[TestServer, string]> = [
      [plainServer, 'approvals:decide'],
      [prefixedServer, 'alcarta:approvals:decide'],
    ];
    for (const [server, scope] of probes) {
      const reader = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
      const res = await fetch(`${server.url}/v1/requests`, { headers: { authorization: `Bearer ${reader.secret}` } });
      assert.equal(res.status, 403);
      assert.equal(
        res.headers.get('www-authenticate'),
        `Bearer realm="alcarta", error="insufficient_scope", scope="${scope}"`,
      );
      const tokens = await fetch(`${server.url}/v1/tokens`, { headers: { authorization: `Bearer ${reader.secret}` } });
      assert.equal(tokens.status, 403);
      assert.match(
        tokens.headers.get('www-authenticate') ?? '',
        /error="insufficient_scope", scope="(alcarta:)?admin"$/,
      );
    }
  });

  it("the MCP SDK's own discovery finds the authorization server from a 401", async () => {
    const serverUrl = new URL('/mcp', oauthServer.url);
    const refused = await rawMcp(oauthServer.url, undefined, LIST_TOOLS);
    const params = extractWWWAuthenticateParams({ headers: refused.headers } as Response);
    assert.equal(params.resourceMetadataUrl?.href, `${oauthServer.url}/.well-known/oauth-protected-resource/mcp`);
    assert.equal(params.error, undefined);

    const hinted = await discoverOAuthProtectedResourceMetadata(serverUrl, {
      resourceMetadataUrl: params.resourceMetadataUrl,
    });
    assert.deepEqual(hinted.authorization_servers, [issuer]);
    // Without the hint the SDK probes the path-suffixed well-known URL itself.
    const probed = await discoverOAuthProtectedResourceMetadata(serverUrl);
    assert.deepEqual(probed.authorization_servers, [issuer]);
    // The RFC 8707 resource the SDK will ask tokens for is the one Alcarta accepts as audience.
    const resource = await selectResourceURL(serverUrl, {} as never, probed);
    assert.equal(resource?.href, serverUrl.href);
  });
});
