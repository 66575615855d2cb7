/**
 * Keys (credentials, client addresses) tracked at once per limiter; beyond it, idle (full) buckets
 * are dropped first.
 */
const MAX_BUCKETS = 10_000;

interface Bucket {
  tokens: number;
  refilledAt: number;
}

/**
 * Token buckets in memory, one per key (a credential, a client address): `perSecond` requests per
 * second, bursts of `capacity` (by default twice the rate). Each replica limits on its own (per
 * credential and replica, docs/operators.md, "Limits and hardening"). A request takes one token
 * when it arrives, so a wait that stays parked for an hour cost one request.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  /** `perSecond` 0 turns limiting off. */
  constructor(
    private readonly perSecond: number,
    private readonly capacity = perSecond * 2,
  ) {}

  /** Takes a token for `key`: undefined when allowed, else the seconds until one is available. */
  take(key: string, now = Date.now()): number | undefined {
    if (this.perSecond === 0) return undefined;
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= MAX_BUCKETS) this.evict(now);
      bucket = { tokens: this.capacity, refilledAt: now };
      this.buckets.set(key, bucket);
    } else {
      this.refill(bucket, now);
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return undefined;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.perSecond));
  }

  /** Gives back the token a request of `key` took (it turned out not to count). */
  refund(key: string, now = Date.now()): void {
    const bucket = this.buckets.get(key);
    if (!bucket) return;
    this.refill(bucket, now);
    bucket.tokens = Math.min(this.capacity, bucket.tokens + 1);
  }

  private refill(bucket: Bucket, now: number): void {
    bucket.tokens = Math.min(this.capacity, bucket.tokens + ((now - bucket.refilledAt) / 1000) * this.perSecond);
    bucket.refilledAt = now;
  }

  /** Drops every bucket that has refilled completely (its credential is idle); if none, the oldest. */
  private evict(now: number): void {
    for (const [key, bucket] of this.buckets) {
      this.refill(bucket, now);
      if (bucket.tokens >= this.capacity) this.buckets.delete(key);
    }
    if (this.buckets.size >= MAX_BUCKETS) {
      const oldest = this.buckets.keys().next().value;
      if (oldest !== undefined) this.buckets.delete(oldest);
    }
  }
}
