import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { FakeAuthorizationServer, SigningKey, signingKey } from '../support/fake-authorization-server';
import { callOk, connectMcp, rawMcp } from '../support/mcp';
import { startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/**
 * docs/operators.md "Identity providers": JWT access tokens beside static tokens. A small
 * authorization server on loopback publishes RFC 8414 metadata and a JWKS whose keys the test
 * controls (rotation, outage); tokens are crafted with jose, so every way a token can be wrong gets
 * its own case.
 */
const LIST_TOOLS = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };

describe('OAuth JWT access tokens (docs/operators.md "Identity providers")', () => {
  let server: TestServer;
  const as = new FakeAuthorizationServer();
  let key1: SigningKey;
  let key2: SigningKey;
  let stranger: SigningKey;
  let audience: string;

  function token(
    key: SigningKey,
    claims: Record<string, unknown> = {},
    options: { iss?: string; aud?: string; exp?: number; nbf?: number } = {},
  ): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const jwt = new SignJWT({ scope: 'mail:read approvals:read', client_id: 'agent-client', ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
      .setIssuer(options.iss ?? as.issuer)
      .setAudience(options.aud ?? audience)
      .setSubject('agent-7')
      .setIssuedAt(now)
      .setExpirationTime(options.exp ?? now + 300);
    if (options.nbf !== undefined) jwt.setNotBefore(options.nbf);
    return jwt.sign(key.privateKey);
  }

  async function toolNames(jwt: string): Promise<{ status: number; names: string[] | undefined }> {
    const res = await rawMcp(server.url, jwt, LIST_TOOLS);
    const tools = (res.json as { result?: { tools: Array<{ name: string }> } } | undefined)?.result?.tools;
    return { status: res.status, names: tools?.map((t) => t.name).sort() };
  }

  async function assertRefused(jwt: string): Promise<void> {
    const mcp = await rawMcp(server.url, jwt, LIST_TOOLS);
    assert.equal(mcp.status, 401, mcp.text);
    const rest = await fetch(`${server.url}/v1/mailboxes`, { headers: { authorization: `Bearer ${jwt}` } });
    assert.equal(rest.status, 401);
    assert.equal(((await rest.json()) as { reason: string }).reason, 'invalid_token');
  }

  before(async () => {
    [key1, key2, stranger] = await Promise.all([signingKey('key-1'), signingKey('key-2'), signingKey('key-x')]);
    await as.start();
    as.keys = [key1];
    server = await startTestServer({ ownPublicUrl: true, env: { ALCARTA_OAUTH_ISSUER: as.issuer } });
    audience = `${server.running.url}/mcp`;
  });

  after(async () => {
    await server?.close();
    await as.stop();
  });

  it('accepts a valid JWT over MCP: tools follow its scopes, mailboxes follow grants (none yet)', async () => {
    const client = await connectMcp(server.url, await token(key1));
    try {
      const names = (await client.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(names, [
        'cancel_request',
        'email_await',
        'get_message',
        'get_request',
        'list_mailboxes',
        'list_messages',
        'monitor_approval',
        'monitor_inbox',
        'request_approval',
      ]);
      const listed = await callOk<{ mailboxes: unknown[] }>(client, 'list_mailboxes');
      assert.deepEqual(listed.mailboxes, []);
    } finally {
      await client.close();
    }
  });

  it('maps scp arrays too, and never grants admin without ALCARTA_OAUTH_ALLOW_ADMIN', async () => {
    const jwt = await token(key1, { scope: undefined, scp: ['mail:send', 'admin', 'openid'] });
    assert.deepEqual((await toolNames(jwt)).names, ['list_mailboxes', 'send_email']);
    const admin = await fetch(`${server.url}/v1/tokens`, { headers: { authorization: `Bearer ${jwt}` } });
    assert.equal(admin.status, 403);
  });

  it('gives a token without Alcarta scopes only the scope-free tool, and no REST access', async () => {
    const jwt = await token(key1, { scope: 'openid profile' });
    const result = await toolNames(jwt);
    assert.equal(result.status, 200);
    assert.deepEqual(result.names, ['list_mailboxes']);
    const rest = await fetch(`${server.url}/v1/requests`, { headers: { authorization: `Bearer ${jwt}` } });
    assert.equal(rest.status, 403);
  });

  it('refuses a wrong audience', async () => {
    await assertRefused(await token(key1, {}, { aud: 'https://other.example/mcp' }));
  });

  it('refuses a wrong issuer', async () => {
    await assertRefused(await token(key1, {}, { iss: 'https://evil.example' }));
  });

  it('refuses an expired token (beyond the 60 s skew)', async () => {
    const now = Math.floor(Date.now() / 1000);
    await assertRefused(await token(key1, {}, { exp: now - 120 }));
  });

  it('refuses a token that is not yet valid (beyond the 60 s skew)', async () => {
    const now = Math.floor(Date.now() / 1000);
    await assertRefused(await token(key1, {}, { nbf: now + 120 }));
  });

  it('refuses a token signed by a key the issuer does not publish', async () => {
    await assertRefused(await token({ ...stranger, kid: key1.kid }));
  });

  it('refuses alg "none"', async () => {
    const valid = await token(key1);
    const [, payload] = valid.split('.');
    const header = Buffer.from(JSON.stringify({ alg: 'none', kid: key1.kid })).toString('base64url');
    await assertRefused(`${header}.${payload}.`);
  });

  it('refuses HS256 signed with the public key as the secret', async () => {
    const now = Math.floor(Date.now() / 1000);
    const forged = await new SignJWT({ scope: 'mail:read' })
      .setProtectedHeader({ alg: 'HS256', kid: key1.kid })
      .setIssuer(as.issuer)
      .setAudience(audience)
      .setSubject('agent-7')
      .setExpirationTime(now + 300)
      .sign(new TextEncoder().encode(key1.publicPem));
    await assertRefused(forged);
  });

  it('refuses a garbage bearer value as before', async () => {
    await assertRefused('not-a-jwt');
  });

  it('keeps cached keys through a JWKS outage, fails closed for a new kid, then picks up the rotation', async () => {
    assert.equal((await toolNames(await token(key1))).status, 200);
    as.down = true;
    try {
      assert.equal((await toolNames(await token(key1))).status, 200, 'a cached key keeps working');
      await assertRefused(await token(key2));
    } finally {
      as.down = false;
    }
    as.keys = [key1, key2];
    // The key set is refreshed for an unknown kid at most once a minute: the new key is accepted
    // once the cool-down since the last fetch has passed, without a restart.
    await waitFor('the rotated key to be accepted', async () => (await toolNames(await token(key2))).status === 200, {
      timeoutMs: 90_000,
      intervalMs: 1000,
    });
  });
});
