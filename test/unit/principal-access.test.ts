import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { losesMailbox } from '#app/kernel/caller.js';
import { decodeDoorbell, encodeDoorbell } from '#app/events/doorbell.js';

describe('losing a mailbox (docs/operators.md "Limits and hardening"; access_removed)', () => {
  it('is losing any listed mailbox, or all of them', () => {
    assert.equal(losesMailbox(['mbx_a', 'mbx_b'], ['mbx_a']), true);
    assert.equal(losesMailbox(['mbx_a'], []), true);
    assert.equal(losesMailbox(['*'], ['mbx_a', 'mbx_b']), true, 'every mailbox, then some');
  });

  it('is not gaining, keeping, or keeping every mailbox', () => {
    assert.equal(losesMailbox(['mbx_a'], ['mbx_a', 'mbx_b']), false);
    assert.equal(losesMailbox([], []), false);
    assert.equal(losesMailbox(['mbx_a'], ['*']), false);
    assert.equal(losesMailbox(['*'], ['*']), false);
  });
});

describe('the credential_revoked doorbell', () => {
  it('carries access_removed when a principal lost a mailbox, and nothing for a token', () => {
    const removed = encodeDoorbell({ kind: 'credential_revoked', tokenId: 'prn_x', reason: 'access_removed' });
    assert.deepEqual(decodeDoorbell(`${removed} 1700000000000`), {
      kind: 'credential_revoked',
      tokenId: 'prn_x',
      reason: 'access_removed',
      at: 1700000000000,
    });
    assert.deepEqual(decodeDoorbell(encodeDoorbell({ kind: 'credential_revoked', tokenId: 'tok_y' })), {
      kind: 'credential_revoked',
      tokenId: 'tok_y',
      at: undefined,
    });
  });
});

describe('the session_ended doorbell', () => {
  it('names a console session by its stored hash', () => {
    const sessionId = 'a'.repeat(64);
    assert.equal(encodeDoorbell({ kind: 'session_ended', sessionId }), `s ${sessionId}`);
    assert.deepEqual(decodeDoorbell(`s ${sessionId} 1700000000000`), {
      kind: 'session_ended',
      sessionId,
      at: 1700000000000,
    });
  });
});
