/** Retries of one message are at most this far apart, however many attempts failed. */
export const MAX_RETRY_DELAY_MS = 3600_000;

export interface RetryPolicy {
  /** The first retry's delay (ALCARTA_SMTP_RETRY_BASE_SECONDS); each later one doubles. */
  baseMs: number;
  /** How long after queueing a message is still retried (ALCARTA_SMTP_RETRY_MAX_SECONDS). */
  maxMs: number;
}

/**
 * The delay before retry number `attempts` (1 after the first failed attempt): base · 2^(attempts−1),
 * capped at one hour, with "equal jitter" (a random point in the upper half) so that messages that
 * failed together, e.g. while the relay was down, do not all come back at the same moment.
 * `random` is in [0, 1).
 */
export function retryDelayMs(attempts: number, baseMs: number, random: number): number {
  const exponent = Math.min(Math.max(attempts - 1, 0), 30);
  const ceiling = Math.min(baseMs * 2 ** exponent, MAX_RETRY_DELAY_MS);
  return Math.round(ceiling / 2 + (ceiling / 2) * random);
}

export type RetryDecision = { status: 'retrying'; nextAttemptAt: Date } | { status: 'failed' };

/**
 * What follows a temporary failure: another attempt after the backoff delay, or `failed` when that
 * attempt would start after the retry window (queued_at + maxMs) has closed.
 */
export function afterTemporaryFailure(
  delivery: { attempts: number; queuedAt: Date },
  now: Date,
  policy: RetryPolicy,
  random: number = Math.random(),
): RetryDecision {
  const next = now.getTime() + retryDelayMs(delivery.attempts, policy.baseMs, random);
  if (next > delivery.queuedAt.getTime() + policy.maxMs) return { status: 'failed' };
  return { status: 'retrying', nextAttemptAt: new Date(next) };
}
