import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { principalId } from '#app/auth/oauth/principal-claims.js';
import { createTestDatabase, TestDatabase } from '../support/database';
import { FakeAuthorizationServer, SigningKey, signingKey } from '../support/fake-authorization-server';
import { rawMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { scrubbed, spawnServer, SpawnedServer } from '../support/spawned-server';
import { createMailbox, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const AUDIENCE = 'https://alcarta.logs.test/mcp';
const SUBJECT = 'log-agent';
const CLIENT = 'log-client';

interface RequestLine {
  msg?: string;
  req?: { method: string; path: string };
  res?: { status: number };
  caller?: Record<string, string>;
}

/**
 * "no secrets in logs" (docs/operators.md, "Limits and hardening") for JWT access tokens
 * (docs/operators.md "Identity providers"), on a real process and its real output: a valid and a
 * forged JWT sent in the Authorization header, in a path and in a query string never appear in any
 * line, and the request line of the valid one names its principal.
 */
describe('OAuth tokens in logs', () => {
  let db: TestDatabase;
  let server: SpawnedServer;
  let admin: RestClient;
  const issuer = new FakeAuthorizationServer();
  let key: SigningKey;
  let stranger: SigningKey;
  const adminSecret = randomSecret();

  const jwt = (signedWith: SigningKey) =>
    new SignJWT({ scope: 'mail:read', client_id: CLIENT })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
      .setIssuer(issuer.issuer)
      .setAudience(AUDIENCE)
      .setSubject(SUBJECT)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(signedWith.privateKey);

  before(async () => {
    [key, stranger] = await Promise.all([signingKey('log-key'), signingKey('log-key')]);
    issuer.keys = [key];
    await issuer.start();
    db = await createTestDatabase();
    server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_BOOTSTRAP_TOKEN: adminSecret,
      ALCARTA_LOG_LEVEL: 'info',
      ALCARTA_OAUTH_ISSUER: issuer.issuer,
      ALCARTA_OAUTH_AUDIENCE: AUDIENCE,
    });
    admin = new RestClient(server.url, adminSecret);
  });

  after(async () => {
    await server?.stop('SIGTERM');
    await db?.drop();
    await issuer.stop();
  });

  const requestLines = (): RequestLine[] =>
    server
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as RequestLine)
      .filter((entry) => entry.req !== undefined);

  it('never logs a valid or a forged JWT, wherever it is sent; the valid one is logged by its principal', async () => {
    const mailboxId = await createMailbox(admin);
    assert.equal((await admin.post('/v1/grants', { principal: `sub:${SUBJECT}`, mailboxes: [mailboxId] })).status, 201);
    const valid = await jwt(key);
    // Same kid, another key: its signature does not verify.
    const forged = await jwt(stranger);
    const list = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };

    const accepted = await rawMcp(server.url, valid, list);
    assert.equal(accepted.status, 200, accepted.text);
    assert.equal((await rawMcp(server.url, forged, list)).status, 401);
    for (const token of [valid, forged]) {
      // In a path: authenticated (admin) and not (the guard refuses before any route matches).
      assert.equal((await admin.get(`/v1/waits/${token}/socket`)).status, 404);
      assert.equal((await fetch(`${server.url}/v1/tokens/${token}`, { method: 'DELETE' })).status, 401);
      assert.equal((await fetch(`${server.url}/no-such-route/${token}?access_token=${token}`)).status, 404);
      // In a query string, beside a valid and beside its own bearer header.
      assert.equal((await admin.get(`/v1/mailboxes?access_token=${token}`)).status, 200);
      const query = await fetch(`${server.url}/v1/mailboxes?access_token=${token}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      await query.text();
      assert.equal(query.status, token === valid ? 403 : 401, 'mail:read alone may not list mailboxes over REST');
    }

    const mcpLines = await waitFor('the request lines of both MCP calls', () => {
      const lines = requestLines().filter((l) => l.req?.path === '/mcp');
      return lines.length === 2 ? lines : undefined;
    });
    // The lines of every request above: the last one sent is logged last. Only the four GETs count
    // (createMailbox's POST has the same path), and a count that keeps growing cannot be missed.
    await waitFor(
      'the request line of the last request',
      () => requestLines().filter((l) => l.req?.method === 'GET' && l.req.path === '/v1/mailboxes').length >= 4,
    );

    const output = server.stdout() + server.stderr();
    for (const token of [valid, forged]) {
      for (const segment of token.split('.')) {
        assert.ok(!output.includes(segment), `part of a JWT reached the log:\n${scrubbed(output).slice(-4000)}`);
      }
    }
    assert.ok(
      requestLines().some((l) => l.req?.path === '/v1/waits/[REDACTED]/socket'),
      'the request line of a JWT in a path is there, with the token masked',
    );

    const validLine = mcpLines.find((l) => l.res?.status === 200);
    assert.deepEqual(validLine?.caller, {
      principal: principalId(issuer.issuer, SUBJECT),
      subject: SUBJECT,
      client_id: CLIENT,
    });
    const refusedLine = mcpLines.find((l) => l.res?.status === 401);
    assert.ok(refusedLine, 'the refused call is logged');
    assert.equal(refusedLine.caller, undefined, 'a refused token names no caller');
  });
});
