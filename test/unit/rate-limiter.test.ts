import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RateLimiter } from '#app/http/rate-limiter.js';

describe('RateLimiter (token bucket)', () => {
  it('allows a burst of twice the rate, then one request per 1/rate seconds', () => {
    const limiter = new RateLimiter(50);
    const t0 = 1_000_000;
    for (let i = 0; i < 100; i++) assert.equal(limiter.take('a', t0), undefined, `request ${i + 1} of the burst`);
    assert.equal(limiter.take('a', t0), 1, 'the 101st waits');
    assert.equal(limiter.take('b', t0), undefined, 'another key has its own bucket');
    assert.equal(limiter.take('a', t0 + 20), undefined, 'one token back after 20 ms');
    assert.equal(limiter.take('a', t0 + 20), 1);
    for (let i = 0; i < 100; i++) assert.equal(limiter.take('a', t0 + 60_000), undefined, 'refilled to the burst');
    assert.equal(limiter.take('a', t0 + 60_000), 1, 'but not beyond it');
  });

  it('says how long to wait: at least a second, more at low rates', () => {
    const limiter = new RateLimiter(0.5);
    assert.equal(limiter.take('a', 0), undefined);
    assert.equal(limiter.take('a', 0), 2);
  });

  it('is off at 0', () => {
    const limiter = new RateLimiter(0);
    for (let i = 0; i < 10_000; i++) assert.equal(limiter.take('a', 0), undefined);
  });

  it('keeps a bounded number of buckets, dropping idle ones first', () => {
    const limiter = new RateLimiter(1);
    for (let i = 0; i < 10_000; i++) limiter.take(`idle-${i}`, 0);
    limiter.take('busy', 0);
    limiter.take('busy', 0);
    assert.equal(limiter.take('busy', 0), 1, 'busy is out of tokens');
    // Later every idle bucket has refilled; a new key evicts them, busy (still refilling) survives
    // only if it is not full: at t = 1 s it has one token again, so it is not full (capacity 2).
    assert.equal(limiter.take('new', 1000), undefined);
    assert.equal(limiter.take('busy', 1000), undefined);
    assert.equal(limiter.take('busy', 1000), 1, 'busy kept its bucket (it was not reset to a full one)');
  });

  it('takes a burst size of its own, and gives back a token that did not count', () => {
    const limiter = new RateLimiter(10 / 60, 10);
    for (let i = 0; i < 10; i++) assert.equal(limiter.take('a', 0), undefined);
    assert.equal(limiter.take('a', 0), 6, 'one attempt per 6 s after the burst');
    limiter.refund('a', 0);
    assert.equal(limiter.take('a', 0), undefined, 'the refunded token');
    for (let i = 0; i < 20; i++) limiter.refund('b', 0);
    for (let i = 0; i < 10; i++) assert.equal(limiter.take('b', 0), undefined);
    assert.equal(limiter.take('b', 0), 6, 'refunds never raise a bucket above its size');
  });
});
