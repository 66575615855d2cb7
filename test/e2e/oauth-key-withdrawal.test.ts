import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { AccessTokenVerifier, KeySetTiming } from '#app/auth/oauth/access-token-verifier.js';
import { FakeAuthorizationServer, SigningKey, signingKey } from '../support/fake-authorization-server';
import { waitFor } from '../support/wait-for';

const AUDIENCE = 'https://alcarta.keys.test/mcp';
/** Short enough for a test, long enough that a busy machine verifies a token well within it. */
const TIMING: KeySetTiming = { maxAgeMs: 1500, refreshCooldownMs: 1000 };
/** How long a failed fetch is remembered here (ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS), as short as the cool-down. */
const BACKOFF_MS = 1000;
const SETTINGS = { audiences: [AUDIENCE], failureBackoffMs: BACKOFF_MS, maxTokenLifetimeSeconds: 86_400 };
const UNAVAILABLE = { reason: 'identity_provider_unavailable' };

/**
 * docs/operators.md "Identity providers" key handling against a real JWKS endpoint on loopback:
 * fetched keys expire after a bounded age, so a key the identity provider withdrew stops verifying;
 * while the endpoint is down, the keys of the last fetch keep verifying (asked again only once per
 * backoff), and a key it never served is not accepted (identity_provider_unavailable until the
 * endpoint answers).
 */
describe('JWKS key expiry and withdrawal (AccessTokenVerifier)', () => {
  const issuer = new FakeAuthorizationServer();
  let kept: SigningKey;
  let withdrawn: SigningKey;
  let unknown: SigningKey;
  let verifier: AccessTokenVerifier;

  const token = (key: SigningKey) =>
    new SignJWT({ scope: 'mail:read' })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
      .setIssuer(issuer.issuer)
      .setAudience(AUDIENCE)
      .setSubject('agent-7')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(key.privateKey);

  const accepted = async (key: SigningKey) => (await verifier.verify(await token(key))) !== null;

  /** Verifies a token signed with `key`; notes when a call that fetched the JWKS started (before the fetch). */
  let fetchedAt = 0;
  async function verifyNoting(key: SigningKey): Promise<boolean> {
    const before = issuer.jwksRequests;
    const started = Date.now();
    const ok = await accepted(key);
    if (issuer.jwksRequests !== before) fetchedAt = started;
    return ok;
  }

  before(async () => {
    [kept, withdrawn, unknown] = await Promise.all([signingKey('kept'), signingKey('withdrawn'), signingKey('new')]);
    await issuer.start();
  });

  beforeEach(() => {
    issuer.down = false;
    issuer.keys = [kept, withdrawn];
    verifier = new AccessTokenVerifier({ ...SETTINGS, issuer: issuer.issuer, jwksUrl: undefined }, TIMING);
  });

  after(async () => {
    await issuer.stop();
  });

  it('refuses a withdrawn key once the fetched keys are older than the maximum age', async () => {
    assert.equal(await verifyNoting(withdrawn), true);
    const fetches = issuer.jwksRequests;
    issuer.keys = [kept];
    if (Date.now() - fetchedAt < TIMING.maxAgeMs - 500) {
      assert.equal(await verifyNoting(withdrawn), true, 'within the maximum age the cached key still verifies');
      assert.equal(issuer.jwksRequests, fetches, 'and the key set is not fetched again');
    }

    await waitFor('the withdrawn key to be refused', async () => !(await verifyNoting(withdrawn)), {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    assert.ok(issuer.jwksRequests > fetches, 'refused after fetching the key set again');
    assert.ok(Date.now() - fetchedAt < TIMING.maxAgeMs, 'refused by the fresh key set');
    assert.equal(await accepted(kept), true, 'the key still published keeps verifying');
    assert.equal(await accepted(withdrawn), false, 'and the withdrawn one stays refused');
  });

  it('keeps the last fetched keys through a JWKS outage past the maximum age, asking once per backoff', async () => {
    assert.equal(await accepted(kept), true);
    const fetched = Date.now();
    issuer.down = true;
    await waitFor('the fetched keys to pass their maximum age', () => Date.now() - fetched > TIMING.maxAgeMs, {
      intervalMs: 50,
    });

    const fetches = issuer.jwksRequests;
    const askedAt = Date.now();
    assert.equal(await accepted(kept), true, 'a stale key still verifies while the endpoint is down');
    assert.equal(issuer.jwksRequests, fetches + 1, 'after one attempt to fetch the key set');
    if (Date.now() - askedAt < BACKOFF_MS - 300) {
      assert.equal(await accepted(kept), true);
      assert.equal(issuer.jwksRequests, fetches + 1, 'within the backoff the endpoint is not asked again');
    }
    await assert.rejects(accepted(unknown), UNAVAILABLE, 'a key the endpoint never served is not accepted');

    // The endpoint is back without the withdrawn key: refused once the backoff has passed.
    issuer.keys = [kept];
    issuer.down = false;
    if (Date.now() - askedAt < BACKOFF_MS - 300) {
      assert.equal(await accepted(withdrawn), true, 'until the backoff passes, the last fetched keys still hold it');
    }
    await waitFor('the withdrawn key to be refused after the outage', async () => !(await accepted(withdrawn)), {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    assert.equal(await accepted(kept), true);
  });

  it('accepts no token when the endpoint has never answered', async () => {
    issuer.down = true;
    await assert.rejects(accepted(kept), UNAVAILABLE);
  });
});
