import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { freePort } from '#app/common/net.js';
import { IdentityProvider, startIdentityProvider } from '../support/identity-provider';
import { callOk, connectMcp } from '../support/mcp';
import { startTestServer, TestServer } from '../support/test-server';

/**
 * docs/operators.md "Identity providers" against a real authorization server: oidc-provider
 * in-process on loopback (see test/support/identity-provider.ts) issues client-credentials JWT
 * access tokens for the RFC 8707 resource `<public URL>/mcp`. It publishes only OpenID Connect
 * discovery here (no RFC 8414 document), so Alcarta must fall back to
 * `/.well-known/openid-configuration` to find its keys.
 */
describe('OAuth with oidc-provider (client credentials, resource indicator)', () => {
  let server: TestServer;
  let idp: IdentityProvider;

  before(async () => {
    const appUrl = `http://127.0.0.1:${await freePort()}`;
    idp = await startIdentityProvider({ resource: `${appUrl}/mcp`, openIdDiscoveryOnly: true });
    server = await startTestServer({
      env: { PORT: new URL(appUrl).port, ALCARTA_PUBLIC_URL: appUrl, ALCARTA_OAUTH_ISSUER: idp.issuer },
    });
  });

  after(async () => {
    await server?.close();
    await idp?.close();
  });

  it('accepts the provider token over MCP with the scopes it was issued', async () => {
    const token = await idp.clientCredentialsToken('mail:read');
    assert.equal(decodeJwt(token).aud, `${server.url}/mcp`);
    const client = await connectMcp(server.url, token);
    try {
      const names = (await client.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(names, ['email_await', 'get_message', 'list_mailboxes', 'list_messages', 'monitor_inbox']);
      const listed = await callOk<{ mailboxes: unknown[] }>(client, 'list_mailboxes');
      assert.deepEqual(listed.mailboxes, []);
    } finally {
      await client.close();
    }
    const rfc8414 = idp.requests.indexOf('GET /.well-known/oauth-authorization-server');
    assert.ok(rfc8414 >= 0, idp.requests.join('\n'));
    assert.ok(
      idp.requests.indexOf('GET /.well-known/openid-configuration', rfc8414) > rfc8414,
      idp.requests.join('\n'),
    );
    assert.ok(idp.requests.includes('GET /jwks'), idp.requests.join('\n'));
  });
});
