import assert from 'node:assert/strict';
import { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { exportJWK, generateKeyPair } from 'jose';
import { freePort } from '#app/common/net.js';
import { callOk, connectMcp } from '../support/mcp';
import { startTestServer, TestServer } from '../support/test-server';

/**
 * SPEC 10 against a real authorization server: oidc-provider in-process on loopback issues
 * client-credentials JWT access tokens for the RFC 8707 resource `<public URL>/mcp`. It publishes
 * only OpenID Connect discovery, so this also covers the fallback from RFC 8414 metadata.
 */
describe('OAuth with oidc-provider (client credentials, resource indicator)', () => {
  let server: TestServer;
  let provider: Server;
  let issuer: string;
  let resource: string;

  before(async () => {
    const appUrl = `http://127.0.0.1:${await freePort()}`;
    resource = `${appUrl}/mcp`;
    const port = await freePort();
    issuer = `http://127.0.0.1:${port}`;
    const { privateKey } = await generateKeyPair('RS256', { extractable: true });
    // oidc-provider is ESM only; this test file is CommonJS.
    const { default: Provider } = (await import('oidc-provider')) as { default: new (...args: unknown[]) => any };
    const oidc = new Provider(issuer, {
      scopes: ['mail:read', 'approvals:read'],
      clients: [
        {
          client_id: 'agent',
          client_secret: 'agent-secret',
          grant_types: ['client_credentials'],
          redirect_uris: [],
          response_types: [],
          scope: 'mail:read approvals:read',
        },
      ],
      jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: 'provider-key', alg: 'RS256', use: 'sig' }] },
      features: {
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => resource,
          useGrantedResource: () => true,
          getResourceServerInfo: () => ({
            scope: 'mail:read approvals:read',
            audience: resource,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          }),
        },
      },
    });
    provider = await new Promise<Server>((resolve) => {
      const listening: Server = oidc.listen(port, '127.0.0.1', () => resolve(listening));
    });
    server = await startTestServer({
      env: { PORT: new URL(appUrl).port, ALCARTA_PUBLIC_URL: appUrl, ALCARTA_OAUTH_ISSUER: issuer },
    });
  });

  after(async () => {
    await server?.close();
    await new Promise<void>((resolve) => provider?.close(() => resolve()));
  });

  async function clientCredentialsToken(scope: string): Promise<string> {
    const res = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from('agent:agent-secret').toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope }),
    });
    const body = (await res.json()) as { access_token?: string };
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.ok(body.access_token);
    return body.access_token;
  }

  it('accepts the provider token over MCP with the scopes it was issued', async () => {
    const client = await connectMcp(server.url, await clientCredentialsToken('mail:read'));
    try {
      const names = (await client.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(names, ['email_await', 'get_message', 'list_mailboxes', 'list_messages', 'monitor_inbox']);
      const listed = await callOk<{ mailboxes: unknown[] }>(client, 'list_mailboxes');
      assert.deepEqual(listed.mailboxes, []);
    } finally {
      await client.close();
    }
  });
});
