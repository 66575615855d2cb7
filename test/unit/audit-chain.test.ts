import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AuditEntry,
  canonicalJson,
  chainEntry,
  checkpointSignature,
  entrySha256,
  GENESIS_SHA256,
  verifyChain,
} from '#app/audit/audit-chain.js';

const fields = (n: number) => ({
  at: `2026-01-01T00:00:0${n}.000Z`,
  action: 'token_created',
  actor: { token_id: `tok_${n}` },
  client_address: '127.0.0.1',
  subject: { token_id: `tok_new${n}`, scopes: ['admin'] },
});

function chain(length: number): AuditEntry[] {
  const entries: AuditEntry[] = [];
  for (let n = 1; n <= length; n++) entries.push(chainEntry(entries.at(-1), fields(n)));
  return entries;
}

const key = { id: 'abcd1234', bytes: Buffer.alloc(32, 7) };

describe('audit chain', () => {
  it('canonical JSON sorts keys at every level and has no whitespace (RFC 8785)', () => {
    assert.equal(canonicalJson({ b: 1, a: { d: [2, 'x'], c: null } }), '{"a":{"c":null,"d":[2,"x"]},"b":1}');
    assert.equal(canonicalJson({ z: 'é', a: '\u2028' }), '{"a":"\u2028","z":"é"}');
  });

  it('hashes an entry without its own sha256, independent of key order', () => {
    const [entry] = chain(1);
    assert.equal(entry.seq, 1);
    assert.equal(entry.prev_sha256, GENESIS_SHA256);
    const reordered = Object.fromEntries(Object.entries(entry).reverse()) as unknown as AuditEntry;
    assert.equal(entrySha256(reordered), entry.sha256);
    assert.match(entry.sha256, /^[0-9a-f]{64}$/);
  });

  it('links each entry to the previous one', async () => {
    const entries = chain(3);
    assert.equal(entries[1].prev_sha256, entries[0].sha256);
    assert.deepEqual(await verifyChain(entries), { ok: true, entries: 3, first: 1, last: 3 });
  });

  it('names the first altered, removed or relinked entry', async () => {
    const altered = chain(4);
    altered[2] = { ...altered[2], subject: { token_id: 'tok_other' } };
    assert.deepEqual(await verifyChain(altered), {
      ok: false,
      seq: 3,
      problem: 'the entry does not match its sha256 (altered entry)',
    });
    const removed = chain(4).filter((e) => e.seq !== 2);
    assert.equal(((await verifyChain(removed)) as { seq: number }).seq, 3);
    const rehashed = chain(4);
    const forged = { ...rehashed[1], action: 'grant_created' };
    rehashed[1] = { ...forged, sha256: entrySha256(forged) };
    assert.deepEqual(await verifyChain(rehashed), {
      ok: false,
      seq: 3,
      problem: 'prev_sha256 is not the sha256 of entry 2',
    });
  });

  it('starts from a signed checkpoint, and refuses a forged one', async () => {
    const entries = chain(5);
    const unsigned = { seq: 2, sha256: entries[1].sha256, pruned_at: '2026-02-01T00:00:00.000Z', key_id: key.id };
    const checkpoint = { ...unsigned, signature: checkpointSignature(unsigned, key.bytes) };
    assert.deepEqual(await verifyChain(entries.slice(2), { checkpoint, keys: [key] }), {
      ok: true,
      entries: 3,
      first: 3,
      last: 5,
    });
    const forged = { ...checkpoint, seq: 3, sha256: entries[2].sha256 };
    const verdict = await verifyChain(entries.slice(3), { checkpoint: forged, keys: [key] });
    assert.equal(verdict.ok, false);
    assert.match((verdict as { problem: string }).problem, /signature does not match/);
    const otherKey = await verifyChain(entries.slice(2), { checkpoint, keys: [{ id: 'ffffffff', bytes: key.bytes }] });
    assert.match((otherKey as { problem: string }).problem, /not configured/);
  });

  it('checks a partial export from its first entry when unanchored', async () => {
    const entries = chain(5).slice(2);
    assert.equal((await verifyChain(entries)).ok, false);
    assert.deepEqual(await verifyChain(entries, { anchored: false }), { ok: true, entries: 3, first: 3, last: 5 });
  });
});
