import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { freePort } from '#app/common/net.js';
import { FakeAuthorizationServer, SigningKey, signingKey } from '../support/fake-authorization-server';
import { CONSOLE_CLIENT, IdentityProvider, startIdentityProvider } from '../support/identity-provider';
import { rawMcp } from '../support/mcp';
import { startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS here: far longer than the checks made within it take. */
const BACKOFF_SECONDS = 6;
/** "At once": what a refusal without a fetch takes on a busy machine, far below a fetch timeout. */
const AT_ONCE_MS = 2000;

interface Answer {
  status: number;
  body: any;
  retryAfter: string | null;
  ms: number;
}

async function timed(send: () => Promise<Response>): Promise<Answer> {
  const started = Date.now();
  const res = await send();
  const text = await res.text();
  return {
    status: res.status,
    body: res.headers.get('content-type')?.includes('application/json') ? JSON.parse(text) : text,
    retryAfter: res.headers.get('retry-after'),
    ms: Date.now() - started,
  };
}

/**
 * The identity provider fails: its metadata endpoint accepts connections and never answers. The
 * failure is remembered: JWT requests answer 503 identity_provider_unavailable (REST) or an HTTP
 * 503 JSON-RPC error (/mcp) at once instead of each waiting for a fetch of its own, the provider
 * is asked again only after the backoff, static tokens keep working, and JWTs are accepted again
 * once the provider answers.
 */
describe('identity provider outage: hanging issuer metadata', () => {
  const idp = new FakeAuthorizationServer();
  let server: TestServer;
  let key: SigningKey;
  let jwt: string;

  const rest = (token: string) =>
    timed(() => fetch(`${server.url}/v1/requests`, { headers: { authorization: `Bearer ${token}` } }));
  const mcp = (token: string, id: number) =>
    timed(() =>
      fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list', params: {} }),
      }),
    );

  /** A 503 of the remembered outage; on /mcp a JSON-RPC error answering the request `id`. */
  function assertUnavailable(answer: Answer, surface: 'rest' | 'mcp', id?: number): void {
    assert.equal(answer.status, 503, JSON.stringify(answer.body));
    const retryAfter = Number(answer.retryAfter);
    assert.ok(retryAfter >= 1 && retryAfter <= BACKOFF_SECONDS, `Retry-After ${answer.retryAfter}`);
    const body = surface === 'rest' ? answer.body : answer.body.error.data;
    assert.equal(body.error, 'identity_provider_unavailable');
    if (surface === 'mcp') {
      assert.equal(answer.body.jsonrpc, '2.0');
      assert.equal(answer.body.error.code, -32000);
      assert.equal(answer.body.id, id);
    }
  }

  before(async () => {
    key = await signingKey('key-1');
    await idp.start();
    idp.keys = [key];
    idp.failure = 'hang';
    server = await startTestServer({
      ownPublicUrl: true,
      env: { ALCARTA_OAUTH_ISSUER: idp.issuer, ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS: String(BACKOFF_SECONDS) },
    });
    jwt = await new SignJWT({ scope: 'mail:read approvals:read' })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
      .setIssuer(idp.issuer)
      .setAudience(`${server.url}/mcp`)
      .setSubject('agent-7')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(key.privateKey);
  });

  after(async () => {
    await server?.close();
    await idp.stop();
  });

  it('answers 503 at once while the failure is remembered, keeps static tokens working, and recovers', async () => {
    // Concurrent requests share one discovery (which ends with the fetch timeouts).
    const first = await Promise.all([rest(jwt), rest(jwt), mcp(jwt, 1), mcp(jwt, 2)]);
    first.slice(0, 2).forEach((answer) => assertUnavailable(answer, 'rest'));
    first.slice(2).forEach((answer, i) => assertUnavailable(answer, 'mcp', i + 1));
    const fetches = idp.requests;
    assert.ok(fetches >= 1 && fetches <= 2, `one discovery (RFC 8414, then OpenID Connect): ${fetches} requests`);

    for (let i = 0; i < 6; i++) {
      const answer = i % 2 === 0 ? await rest(jwt) : await mcp(jwt, 10 + i);
      if (i % 2 === 0) assertUnavailable(answer, 'rest');
      else assertUnavailable(answer, 'mcp', 10 + i);
      assert.ok(answer.ms < AT_ONCE_MS, `answered in ${answer.ms} ms`);
    }
    assert.equal(idp.requests, fetches, 'the provider is not asked again while the failure is remembered');

    const staticRest = await timed(() =>
      fetch(`${server.url}/v1/mailboxes`, { headers: { authorization: `Bearer ${server.adminToken}` } }),
    );
    assert.equal(staticRest.status, 200);
    assert.ok(staticRest.ms < AT_ONCE_MS, `a static token is answered in ${staticRest.ms} ms`);
    const staticMcp = await rawMcp(server.url, server.adminToken, { jsonrpc: '2.0', id: 3, method: 'tools/list' });
    assert.equal(staticMcp.status, 200, staticMcp.text);

    idp.failure = undefined;
    const listTools = { jsonrpc: '2.0', id: 4, method: 'tools/list' };
    await waitFor('JWTs to be accepted again', async () => (await rawMcp(server.url, jwt, listTools)).status === 200, {
      timeoutMs: BACKOFF_SECONDS * 1000 + 15_000,
      intervalMs: 200,
    });
    assert.ok(idp.requests > fetches, 'the provider was asked again after the backoff');
  });
});

/**
 * The console's OpenID Connect sign-in when the person's access token cannot be checked: the
 * provider signs the person in, but the key set Alcarta verifies tokens with answers 503. The
 * callback answers a page that says so (503), not a 500, and no session starts.
 */
describe('identity provider outage: console sign-in', () => {
  const keys = new FakeAuthorizationServer();
  let idp: IdentityProvider;
  let server: TestServer;
  let appUrl: string;

  before(async () => {
    appUrl = `http://127.0.0.1:${await freePort()}`;
    idp = await startIdentityProvider({
      resource: `${appUrl}/mcp`,
      consoleRedirectUri: `${appUrl}/console/sign-in/callback`,
    });
    await keys.start();
    keys.down = true;
    server = await startTestServer({
      env: {
        PORT: new URL(appUrl).port,
        ALCARTA_PUBLIC_URL: appUrl,
        ALCARTA_OAUTH_ISSUER: idp.issuer,
        ALCARTA_OAUTH_JWKS_URL: `${keys.issuer}/jwks`,
        ALCARTA_CONSOLE_CLIENT_ID: CONSOLE_CLIENT.clientId,
        ALCARTA_CONSOLE_CLIENT_SECRET: CONSOLE_CLIENT.clientSecret,
      },
    });
  });

  after(async () => {
    await server?.close();
    await idp?.close();
    await keys.stop();
  });

  it('answers the callback with a page that says the provider is unavailable, and starts no session', async () => {
    const start = await fetch(`${appUrl}/console/sign-in/oidc`, { redirect: 'manual' });
    assert.equal(start.status, 303);
    const pending = start.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const callback = await idp.authorize(
      new URL(start.headers.get('location')!),
      'alice',
      `${appUrl}/console/sign-in/callback`,
    );

    const res = await fetch(callback, { redirect: 'manual', headers: { cookie: pending } });
    assert.equal(res.status, 503);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(await res.text(), /identity provider is unavailable/i);
    assert.ok(keys.jwksRequests >= 1, 'the key set was asked for');
    const sessionCookies = res.headers.getSetCookie().filter((c) => /^alcarta_console=[^;]/.test(c));
    assert.deepEqual(sessionCookies, [], 'no session cookie');
    assert.deepEqual(await server.db.query('SELECT credential_id FROM console_sessions'), [], 'no session');
    assert.deepEqual(await server.db.query('SELECT id FROM principals'), [], 'nothing of the token is stored');
  });
});
