import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  Client as ClientV2,
  ClientCredentialsProvider as ClientCredentialsProviderV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodeJwt } from 'jose';
import { Browser } from 'playwright-core';
import { freePort } from '#app/common/net.js';
import { launchChromium } from '../support/browser';
import { AGENT_CLIENT, IdentityProvider, ScopePolicy, startIdentityProvider } from '../support/identity-provider';
import { InMemorySignIn } from '../support/oauth-sign-in';
import { callOk } from '../support/mcp';
import { startMcpRemote } from '../support/mcp-remote';
import { createMailbox, startTestServer, TestServer } from '../support/test-server';

const AGENT_SCOPES = ['approvals:read', 'mail:read', 'mail:send'];

/**
 * Separation of duties as standard MCP clients meet it: clients that ask the authorization server
 * for whatever the resource advertises (mcp-remote, authorization code with dynamic client
 * registration and `--client-credentials`; the v2 SDK's ClientCredentialsProvider, which ignores
 * its configured scope; SDK 1.x's authorization code with dynamic registration) get agent scopes
 * only. Against a strict provider (agent scopes only, anything else `invalid_scope`) they sign in;
 * against a permissive one (every scope to anyone) their tokens still carry no `approvals:decide`,
 * so the agent cannot approve the request it just made. A real oidc-provider, a real Chromium for
 * mcp-remote's browser sign-in, the real mcp-remote process.
 */
describe('standard MCP clients sign in with the agent scopes alone', () => {
  const stacks = new Map<ScopePolicy, { server: TestServer; idp: IdentityProvider; mailboxId: string }>();
  let browser: Browser | undefined;
  let skipReason: string | undefined;

  const stack = (policy: ScopePolicy) => stacks.get(policy)!;
  const start = async (policy: ScopePolicy) => {
    const appUrl = `http://127.0.0.1:${await freePort()}`;
    const idp = await startIdentityProvider({
      resource: `${appUrl}/mcp`,
      scopePolicy: policy,
      dynamicRegistration: true,
    });
    const server = await startTestServer({
      env: { PORT: new URL(appUrl).port, ALCARTA_PUBLIC_URL: appUrl, ALCARTA_OAUTH_ISSUER: idp.issuer },
    });
    const mailboxId = await createMailbox(server.admin);
    for (const principal of [`client:${AGENT_CLIENT.clientId}`, 'sub:alice']) {
      const granted = await server.admin.post('/v1/grants', { principal, mailboxes: [mailboxId] });
      assert.equal(granted.status, 201, JSON.stringify(granted.body));
    }
    stacks.set(policy, { server, idp, mailboxId });
  };

  /**
   * What every client must show: its token carries exactly the agent scopes, it can ask for an
   * approval, and with that same token the approval is refused (403) and stays pending.
   */
  const assertAgentOnly = async (policy: ScopePolicy, accessToken: string, ask: () => Promise<string>) => {
    const { server } = stack(policy);
    const requestId = await ask();
    const approve = await server.admin.withToken(accessToken).post(`/v1/requests/${requestId}/approve`, {});
    assert.equal(approve.status, 403, JSON.stringify(approve.body));
    assert.equal(approve.body.error, 'forbidden');
    const seen = await server.admin.get(`/v1/requests?mailbox_id=${stack(policy).mailboxId}`);
    assert.equal(seen.body.requests.find((r: { request_id: string }) => r.request_id === requestId)?.state, 'pending');
    const scopes = (decodeJwt<{ scope?: string }>(accessToken).scope ?? '').split(' ');
    assert.deepEqual(scopes.sort(), AGENT_SCOPES, `the token's scopes (${policy} provider)`);
  };
  const askWith = (client: { callTool: Client['callTool'] }, policy: ScopePolicy) => async () =>
    (
      await callOk(client as Client, 'request_approval', {
        mailbox_id: stack(policy).mailboxId,
        title: 'Approve my own request',
      })
    ).request_id as string;

  before(async () => {
    await Promise.all([start('strict'), start('permissive')]);
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    await browser?.close();
    for (const { server, idp } of stacks.values()) {
      await server.close();
      await idp.close();
    }
  });

  for (const policy of ['strict', 'permissive'] as const) {
    it(`mcp-remote, browser sign-in with dynamic client registration (${policy} provider)`, async (t) => {
      if (skipReason) return t.skip(skipReason);
      const { server, idp } = stack(policy);
      const context = await browser!.newContext();
      let authorizationUrl: URL | undefined;
      const remote = await startMcpRemote(`${server.url}/mcp`, [String(await freePort())], async (url) => {
        authorizationUrl = url;
        const page = await context.newPage();
        await page.goto(url.href);
        await page.getByLabel('Account').fill('alice');
        const callback = page.waitForURL((u) => u.pathname === '/oauth/callback');
        await page.getByRole('button', { name: 'Continue' }).click();
        await callback;
      });
      try {
        assert.equal(authorizationUrl?.origin, idp.issuer);
        // Besides OpenID Connect's offline_access (refresh tokens), the agent scopes alone.
        const asked = authorizationUrl.searchParams
          .get('scope')!
          .split(' ')
          .filter((s) => s !== 'offline_access');
        assert.deepEqual(asked.sort(), AGENT_SCOPES);
        await assertAgentOnly(policy, await remote.accessToken(), askWith(remote.client, policy));
      } finally {
        await remote.close();
        await context.close();
      }
    });

    it(`mcp-remote --client-credentials (${policy} provider)`, async () => {
      const { server } = stack(policy);
      const remote = await startMcpRemote(`${server.url}/mcp`, [
        '--client-credentials',
        '--static-oauth-client-info',
        JSON.stringify({ client_id: AGENT_CLIENT.clientId, client_secret: AGENT_CLIENT.clientSecret }),
      ]);
      try {
        await assertAgentOnly(policy, await remote.accessToken(), askWith(remote.client, policy));
      } finally {
        await remote.close();
      }
    });

    it(`the v2 SDK's ClientCredentialsProvider (${policy} provider)`, async () => {
      const { server, idp } = stack(policy);
      const authProvider = new ClientCredentialsProviderV2({
        clientId: AGENT_CLIENT.clientId,
        clientSecret: AGENT_CLIENT.clientSecret,
        // Ignored by the SDK: it asks for the scope the 401 names (else the RFC 9728 list).
        scope: AGENT_CLIENT.scope,
        expectedIssuer: idp.issuer,
      });
      const client = new ClientV2({ name: 'agent-v2', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransportV2(new URL('/mcp', server.url), { authProvider }));
      try {
        await assertAgentOnly(policy, authProvider.tokens()!.access_token, askWith(client as never, policy));
      } finally {
        await client.close();
      }
    });

    it(`SDK 1.x, authorization code with dynamic client registration (${policy} provider)`, async () => {
      const { server, idp } = stack(policy);
      const provider = new InMemorySignIn('Desktop agent');
      const mcpUrl = new URL('/mcp', server.url);
      await assert.rejects(
        new Client({ name: 'agent-v1', version: '1.0.0' }).connect(
          new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }),
        ),
        UnauthorizedError,
      );
      assert.ok(provider.registered, 'the SDK registered a client dynamically');
      const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
      await transport.finishAuth(await idp.signIn(provider.authorizationUrl!, 'alice'));
      const client = new Client({ name: 'agent-v1', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
      try {
        await assertAgentOnly(policy, provider.tokens()!.access_token, askWith(client, policy));
      } finally {
        await client.close();
      }
    });
  }
});
