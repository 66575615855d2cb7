import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { AccessTokenVerifier } from '#app/auth/oauth/access-token-verifier.js';
import { freePort } from '#app/common/net.js';
import { FakeAuthorizationServer, SigningKey, signingKey } from '../support/fake-authorization-server';
import { waitFor } from '../support/wait-for';

const AUDIENCE = 'https://alcarta.jwks.test/mcp';
/** ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS here: far longer than the checks made within it take. */
const BACKOFF_MS = 2000;
/** "At once": a refusal without a fetch, on a busy machine. */
const AT_ONCE_MS = 1000;
const UNAVAILABLE = { code: 'identity_provider_unavailable', reason: 'identity_provider_unavailable' };

/**
 * Every way a fetch of the key set can fail (an error status, a body that is not JSON, a refused
 * connection, no answer at all), against a real JWKS endpoint on loopback and a verifier that has
 * no keys yet: the tokens waiting for the fetch share it and are refused with
 * identity_provider_unavailable; the failure is remembered, so later tokens are refused at once
 * without a fetch; after the backoff the endpoint is asked again and its keys verify.
 */
describe('JWKS fetch failures (AccessTokenVerifier)', () => {
  const jwks = new FakeAuthorizationServer();
  let key: SigningKey;

  const token = () =>
    new SignJWT({ scope: 'mail:read' })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
      .setIssuer('https://issuer.jwks.test')
      .setAudience(AUDIENCE)
      .setSubject('agent-7')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(key.privateKey);

  const verifierFor = (jwksUrl: string) =>
    new AccessTokenVerifier({
      issuer: 'https://issuer.jwks.test',
      jwksUrl,
      audiences: [AUDIENCE],
      failureBackoffMs: BACKOFF_MS,
      maxTokenLifetimeSeconds: 86_400,
    });

  /** Checks the failure with the endpoint as `fail` left it; `recover` makes it serve the key. */
  async function assertRemembered(verifier: AccessTokenVerifier, recover: () => void): Promise<void> {
    const jwt = await token();
    const before = jwks.requests;
    await Promise.all([1, 2, 3, 4].map(() => assert.rejects(verifier.verify(jwt), UNAVAILABLE)));
    const fetched = jwks.requests - before;
    assert.ok(fetched <= 1, `one fetch for the concurrent tokens, not ${fetched}`);

    const started = Date.now();
    await assert.rejects(verifier.verify(jwt), UNAVAILABLE);
    assert.ok(Date.now() - started < AT_ONCE_MS, 'refused at once');
    assert.equal(jwks.requests - before, fetched, 'no fetch while the failure is remembered');

    recover();
    const verified = await waitFor(
      'the key to verify after the backoff',
      () => verifier.verify(jwt).catch(() => null),
      {
        timeoutMs: BACKOFF_MS + 10_000,
        intervalMs: 100,
      },
    );
    assert.equal(verified.payload.sub, 'agent-7');
  }

  before(async () => {
    key = await signingKey('key-1');
    await jwks.start();
    jwks.keys = [key];
  });

  after(async () => {
    await jwks.stop();
  });

  it('an error status', async () => {
    jwks.down = true;
    await assertRemembered(verifierFor(`${jwks.issuer}/jwks`), () => (jwks.down = false));
  });

  it('a body that is not JSON', async () => {
    jwks.failure = 'garbage';
    await assertRemembered(verifierFor(`${jwks.issuer}/jwks`), () => (jwks.failure = undefined));
  });

  it('no answer within the fetch timeout', async () => {
    jwks.failure = 'hang';
    await assertRemembered(verifierFor(`${jwks.issuer}/jwks`), () => (jwks.failure = undefined));
  });

  it('a refused connection', async () => {
    const verifier = verifierFor(`http://127.0.0.1:${await freePort()}/jwks`);
    const jwt = await token();
    await assert.rejects(verifier.verify(jwt), UNAVAILABLE);
    const started = Date.now();
    await assert.rejects(verifier.verify(jwt), UNAVAILABLE);
    assert.ok(Date.now() - started < AT_ONCE_MS, 'refused at once');
  });

  it('still refuses what no key could make valid at once, without asking the endpoint', async () => {
    jwks.down = true;
    try {
      const verifier = verifierFor(`${jwks.issuer}/jwks`);
      const before = jwks.requests;
      assert.equal(await verifier.verify('not-a-jwt'), null);
      const expired = await new SignJWT({})
        .setProtectedHeader({ alg: 'RS256', kid: key.kid })
        .setIssuer('https://issuer.jwks.test')
        .setAudience(AUDIENCE)
        .setSubject('agent-7')
        .setExpirationTime(Math.floor(Date.now() / 1000) - 3600)
        .sign(key.privateKey);
      assert.equal(await verifier.verify(expired), null);
      assert.equal(jwks.requests, before);
    } finally {
      jwks.down = false;
    }
  });
});
