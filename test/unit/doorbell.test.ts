import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeDoorbell, Doorbell, encodeDoorbell, requestKey } from '#app/events/doorbell.js';

const BELLS: Doorbell[] = [
  { kind: 'message', mailboxId: 'mbx_a' },
  { kind: 'request', mailboxId: 'mbx_a', requestId: 'chk_b' },
  { kind: 'wait_created', waitId: 'wt_c' },
  { kind: 'wait_resolved', waitId: 'wt_c' },
  { kind: 'credential_revoked', tokenId: 'tok_d' },
  { kind: 'credential_revoked', tokenId: 'prn_e', reason: 'access_removed' },
  { kind: 'call_cancelled', tokenId: 'tok_d', requestKey: 'sMQ' },
  { kind: 'outbox', mailboxId: 'mbx_a' },
  { kind: 'session_ended', sessionId: 'hash_f' },
  { kind: 'webhooks' },
];

describe('doorbell encoding', () => {
  it('round-trips every kind, with the commit time the database appends', () => {
    for (const bell of BELLS) {
      const payload = encodeDoorbell(bell);
      assert.ok(payload.length < 100, `${bell.kind} stays small`);
      assert.deepEqual(decodeDoorbell(payload), { ...bell, at: undefined }, bell.kind);
      assert.deepEqual(decodeDoorbell(`${payload} 1767225600123`), { ...bell, at: 1767225600123 }, bell.kind);
    }
  });

  it('a revocation names its reason only for a removed mailbox', () => {
    assert.equal(encodeDoorbell({ kind: 'credential_revoked', tokenId: 'tok_a' }), 't tok_a');
    assert.equal(decodeDoorbell('t tok_a token_revoked')?.kind, 'credential_revoked');
    assert.equal((decodeDoorbell('t tok_a token_revoked') as { reason?: string }).reason, undefined);
  });

  it('payloads that are not ours decode to undefined', () => {
    for (const payload of ['', 'm', 'x abc', 'r mbx_a', 'c tok_a', '1767225600123', 'hello world']) {
      assert.equal(decodeDoorbell(payload), undefined, JSON.stringify(payload));
    }
  });

  it('request keys keep the id type, carry no space, and refuse ids too long to ring about', () => {
    assert.notEqual(requestKey(1), requestKey('1'));
    assert.equal(requestKey('a b'), 'sYSBi');
    assert.doesNotMatch(requestKey('x '.repeat(50))!, /\s/);
    assert.equal(requestKey('x'.repeat(300)), undefined);
  });
});
