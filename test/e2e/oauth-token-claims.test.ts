import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { IdentityProvider, startIdentityProvider } from '../support/identity-provider';
import { rawMcp } from '../support/mcp';
import { startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const LIST_TOOLS = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const YEAR = 365 * 24 * 3600;

interface StoredPrincipal {
  scopes: string[];
  claims_issued_at: Date;
  updated_at: Date;
}

/**
 * The time claims of JWT access tokens: a token must expire, and may not claim to be issued or
 * valid from later than the 60 s skew. The tokens are signed with the real OpenID provider's own
 * key (it would not issue such tokens itself), so only their claims are wrong. A refused token
 * leaves the principal's stored claims as they were: a token "issued" in the future would
 * otherwise make them newer than every real token to come.
 */
describe('JWT time claims', () => {
  let server: TestServer;
  let idp: IdentityProvider;

  const now = () => Math.floor(Date.now() / 1000);
  const stored = async (subject: string) =>
    (
      await server.db.query<StoredPrincipal>(
        'SELECT scopes, claims_issued_at, updated_at FROM principals WHERE subject = $1',
        [subject],
      )
    )[0];

  async function assertRefused(jwt: string): Promise<void> {
    const rest = await fetch(`${server.url}/v1/requests`, { headers: { authorization: `Bearer ${jwt}` } });
    assert.equal(rest.status, 401);
    assert.equal(((await rest.json()) as { reason: string }).reason, 'invalid_token');
    assert.match(rest.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    const mcp = await rawMcp(server.url, jwt, LIST_TOOLS);
    assert.equal(mcp.status, 401, mcp.text);
    assert.match(mcp.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
  }

  before(async () => {
    const resource = 'http://alcarta.claims.test/mcp';
    idp = await startIdentityProvider({ resource });
    server = await startTestServer({ env: { ALCARTA_OAUTH_ISSUER: idp.issuer, ALCARTA_OAUTH_AUDIENCE: resource } });
  });

  after(async () => {
    await server?.close();
    await idp?.close();
  });

  it('refuses tokens without exp, from the future or valid for too long, and stores nothing of them', async () => {
    const issued = await idp.clientCredentialsToken();
    assert.equal((await rawMcp(server.url, issued, LIST_TOOLS)).status, 200);
    const before = await stored('agent');
    assert.deepEqual([...before.scopes].sort(), ['approvals:read', 'mail:read']);

    // Each would give the principal another scope (mail:send), and so be recorded if accepted.
    const other = { scope: 'mail:read mail:send approvals:read' };
    const refused: Record<string, Record<string, unknown>> = {
      'iat a year ahead': { iat: now() + YEAR },
      'no exp': { exp: undefined },
      'iat two minutes ahead': { iat: now() + 120 },
      'nbf two minutes ahead': { nbf: now() + 120 },
      'exp ten years ahead': { exp: now() + 10 * YEAR },
      'iat before 1970': { iat: -1e12 },
    };
    for (const [name, claims] of Object.entries(refused)) {
      await assertRefused(await idp.signAccessToken({ ...other, ...claims })).catch((err: Error) => {
        throw new Error(`${name}: ${err.message}`);
      });
    }
    assert.deepEqual(await stored('agent'), before, 'the stored claims are those of the issued token');

    // Tokens issued afterwards still change them: nothing was pinned.
    await waitFor('a token issued in a later second', () => now() > before.claims_issued_at.getTime() / 1000);
    idp.setClientScope('agent', 'mail:read');
    assert.equal((await rawMcp(server.url, await idp.clientCredentialsToken('mail:read'), LIST_TOOLS)).status, 200);
    assert.deepEqual((await stored('agent')).scopes, ['mail:read']);
  });

  it('records the claims of the newest token even after an older token with other claims was used', async () => {
    const sub = 'flip-flop';
    const withScope = (scope: string, issuedAgo: number) => idp.signAccessToken({ sub, scope, iat: now() - issuedAgo });
    // Issued before the provider gave the client approvals:read, still valid, used late.
    const old = await withScope('mail:read', 100);
    assert.equal((await rawMcp(server.url, await withScope('mail:read approvals:read', 10), LIST_TOOLS)).status, 200);
    assert.equal((await rawMcp(server.url, old, LIST_TOOLS)).status, 200);
    assert.deepEqual(
      [...(await stored(sub)).scopes].sort(),
      ['approvals:read', 'mail:read'],
      'an older token changes nothing',
    );

    // The provider took approvals:read away again: the newest token has the old token's claims.
    assert.equal((await rawMcp(server.url, await withScope('mail:read', 0), LIST_TOOLS)).status, 200);
    assert.deepEqual((await stored(sub)).scopes, ['mail:read']);
  });

  it('accepts an iat and nbf within the skew (a provider clock slightly ahead) and a day-long token', async () => {
    const jwt = await idp.signAccessToken({
      sub: 'clock-ahead',
      iat: now() + 30,
      nbf: now() + 30,
      exp: now() + 86_400,
    });
    const res = await rawMcp(server.url, jwt, LIST_TOOLS);
    assert.equal(res.status, 200, res.text);
  });
});
