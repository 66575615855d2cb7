import { JWTPayload } from 'jose';

/** The clock difference tolerated between this server and the identity provider. */
export const CLOCK_SKEW_SECONDS = 60;

/**
 * Whether a token's time claims let it be accepted at `now` (seconds since the epoch):
 *  - `exp` is required (a token without it would never expire), not past, and at most
 *    `maxLifetimeSeconds` ahead (a token valid for years is as good as one without `exp`);
 *  - `nbf` and `iat`, when present, are not in the future. A future `iat` matters beyond this
 *    token: the principal's stored claims are replaced only by a token issued later than theirs,
 *    so one "issued" next year would keep them from every real token until then.
 * The clock skew applies to every bound. Each claim must be a NumericDate after 1970 (a huge or
 * negative one is not a time this server can store or compare).
 */
export function withinValidity(claims: JWTPayload, now: number, maxLifetimeSeconds: number): boolean {
  const { exp, nbf, iat } = claims;
  if (!isNumericDate(exp)) return false;
  if (exp <= now - CLOCK_SKEW_SECONDS || exp > now + maxLifetimeSeconds + CLOCK_SKEW_SECONDS) return false;
  for (const notLater of [nbf, iat]) {
    if (notLater !== undefined && !(isNumericDate(notLater) && notLater <= now + CLOCK_SKEW_SECONDS)) return false;
  }
  return true;
}

function isNumericDate(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
