import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { afterTemporaryFailure, MAX_RETRY_DELAY_MS, retryDelayMs } from '#app/outbox/retry-policy.js';

describe('outbox retry backoff', () => {
  const base = 30_000;

  it('doubles from the base, with jitter in the upper half of each step', () => {
    for (const [attempts, ceiling] of [
      [1, 30_000],
      [2, 60_000],
      [3, 120_000],
      [4, 240_000],
    ]) {
      assert.equal(retryDelayMs(attempts, base, 0), ceiling / 2, `attempt ${attempts}, lowest`);
      assert.equal(retryDelayMs(attempts, base, 0.999999), ceiling, `attempt ${attempts}, highest`);
      const middle = retryDelayMs(attempts, base, 0.5);
      assert.ok(middle > ceiling / 2 && middle < ceiling);
    }
  });

  it('never waits more than an hour between attempts, however many failed', () => {
    assert.equal(MAX_RETRY_DELAY_MS, 3600_000);
    for (const attempts of [8, 9, 50, 1000, Number.MAX_SAFE_INTEGER]) {
      const highest = retryDelayMs(attempts, base, 0.999999);
      assert.ok(highest <= MAX_RETRY_DELAY_MS, `attempt ${attempts}: ${highest}`);
      assert.ok(highest >= MAX_RETRY_DELAY_MS - 10, `attempt ${attempts} reaches the cap: ${highest}`);
      assert.equal(retryDelayMs(attempts, base, 0), MAX_RETRY_DELAY_MS / 2);
    }
    // A base larger than the cap is capped too.
    assert.ok(retryDelayMs(1, 2 * 3600_000, 0.999999) <= MAX_RETRY_DELAY_MS);
  });

  it('treats a count below one as the first attempt', () => {
    assert.equal(retryDelayMs(0, base, 0), base / 2);
  });

  it('schedules the next attempt within the retry window and gives up after it', () => {
    const queuedAt = new Date('2026-12-02T10:00:00Z');
    const policy = { baseMs: 1000, maxMs: 60_000 };
    const early = afterTemporaryFailure({ attempts: 1, queuedAt }, new Date('2026-12-02T10:00:01Z'), policy, 0);
    assert.deepEqual(early, { status: 'retrying', nextAttemptAt: new Date('2026-12-02T10:00:01.500Z') });
    // The next attempt would start after queued_at + maxMs: no more retries.
    const late = afterTemporaryFailure({ attempts: 6, queuedAt }, new Date('2026-12-02T10:00:50Z'), policy, 0.9);
    assert.deepEqual(late, { status: 'failed' });
    // A zero window fails at the first temporary failure.
    assert.deepEqual(afterTemporaryFailure({ attempts: 1, queuedAt }, queuedAt, { baseMs: 1000, maxMs: 0 }, 0), {
      status: 'failed',
    });
  });
});
