import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppConfig } from '#app/config/app-config.js';
import { validateEnvironment } from '#app/config/environment.js';
import { CLOCK_SKEW_SECONDS, withinValidity } from '#app/auth/oauth/token-validity.js';

const NOW = 1_800_000_000;
const DAY = 86_400;
const valid = (claims: Record<string, unknown>) => withinValidity(claims, NOW, DAY);

describe('withinValidity (JWT time claims)', () => {
  it('requires exp, not past and at most the maximum lifetime ahead, with the clock skew', () => {
    assert.equal(valid({ exp: NOW + 300 }), true);
    assert.equal(valid({}), false, 'no exp');
    assert.equal(valid({ exp: String(NOW + 300) }), false, 'not a number');
    assert.equal(valid({ exp: NOW - CLOCK_SKEW_SECONDS + 1 }), true, 'expired within the skew');
    assert.equal(valid({ exp: NOW - CLOCK_SKEW_SECONDS }), false);
    assert.equal(valid({ exp: NOW + DAY + CLOCK_SKEW_SECONDS }), true);
    assert.equal(valid({ exp: NOW + DAY + CLOCK_SKEW_SECONDS + 1 }), false, 'valid for too long');
    assert.equal(valid({ exp: Infinity }), false, 'JSON 1e400');
  });

  it('refuses an iat or nbf beyond the skew in the future, or before 1970', () => {
    for (const claim of ['iat', 'nbf']) {
      assert.equal(valid({ exp: NOW + 300, [claim]: NOW + CLOCK_SKEW_SECONDS }), true, claim);
      assert.equal(valid({ exp: NOW + 300, [claim]: NOW + CLOCK_SKEW_SECONDS + 1 }), false, claim);
      assert.equal(valid({ exp: NOW + 300, [claim]: NOW + 365 * DAY }), false, claim);
      assert.equal(valid({ exp: NOW + 300, [claim]: -1 }), false, claim);
      assert.equal(valid({ exp: NOW + 300, [claim]: -Infinity }), false, claim);
      assert.equal(valid({ exp: NOW + 300, [claim]: null }), false, claim);
    }
    assert.equal(valid({ exp: NOW + 300, iat: NOW - 3600, nbf: NOW - 3600 }), true);
  });
});

describe('OAuth settings', () => {
  const oauth = (env: Record<string, string>) =>
    new AppConfig(validateEnvironment({ ALCARTA_OAUTH_ISSUER: 'https://idp.example', ...env })).oauth!;

  it('remembers a failed fetch for 30 s and accepts tokens valid for up to a day by default', () => {
    assert.equal(oauth({}).failureBackoffMs, 30_000);
    assert.equal(oauth({}).maxTokenLifetimeSeconds, DAY);
    assert.equal(oauth({ ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS: '5' }).failureBackoffMs, 5000);
    assert.equal(oauth({ ALCARTA_OAUTH_MAX_TOKEN_LIFETIME_SECONDS: '604800' }).maxTokenLifetimeSeconds, 604_800);
  });

  it('refuses values out of range', () => {
    for (const [name, value] of [
      ['ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS', '0'],
      ['ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS', '3601'],
      ['ALCARTA_OAUTH_MAX_TOKEN_LIFETIME_SECONDS', '299'],
      ['ALCARTA_OAUTH_MAX_TOKEN_LIFETIME_SECONDS', 'forever'],
    ]) {
      assert.throws(() => validateEnvironment({ [name]: value }), new RegExp(name));
    }
  });
});
