import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Caller } from '#app/kernel/caller.js';
import { hasLapsed } from '#app/auth/credential-revocation.js';

describe('Caller.reaches: what a mailbox-bound admin administers', () => {
  const bound = new Caller('tok_a', new Set(['admin']), ['mbx_a', 'mbx_b']);
  const everywhere = new Caller('tok_b', new Set(['admin']), ['*']);

  it('a bound caller reaches lists within its own mailboxes only', () => {
    assert.equal(bound.reaches(['mbx_a']), true);
    assert.equal(bound.reaches(['mbx_b', 'mbx_a']), true);
    assert.equal(bound.reaches(['mbx_a', 'mbx_c']), false);
    assert.equal(bound.reaches(['mbx_c']), false);
    assert.equal(bound.reaches(['*']), false, '"*" is never within a bound caller');
  });

  it('a caller bound to "*" reaches everything', () => {
    assert.equal(everywhere.reaches(['*']), true);
    assert.equal(everywhere.reaches(['mbx_c']), true);
  });
});

describe('hasLapsed', () => {
  const later = new Date(Date.now() + 60_000);
  const earlier = new Date(Date.now() - 1);

  it('is true for revoked or expired tokens only', () => {
    assert.equal(hasLapsed({ revokedAt: null, expiresAt: null }), false);
    assert.equal(hasLapsed({ revokedAt: null, expiresAt: later }), false);
    assert.equal(hasLapsed({ revokedAt: null, expiresAt: earlier }), true);
    assert.equal(hasLapsed({ revokedAt: earlier, expiresAt: later }), true);
  });
});
