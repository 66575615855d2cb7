import { createHash } from 'node:crypto';

/**
 * The lifetimes `events/subscribe` grants (docs/agents.md, "Webhook delivery"): a client that names
 * none gets an hour; a suggestion is honoured between a minute (shorter ones would make refresh
 * storms) and a week; `ttlMs: null` asks for no expiry, which is granted, since subscriptions are
 * kept in the database across restarts either way.
 */
export const DEFAULT_TTL_MS = 3600_000;
export const MIN_TTL_MS = 60_000;
export const MAX_TTL_MS = 7 * 24 * 3600_000;

/** When the subscription expires, from its suggested lifetime; null: never. */
export function grantedExpiry(ttlMs: number | null | undefined, now: Date): Date | null {
  if (ttlMs === null) return null;
  const granted = Math.min(Math.max(ttlMs ?? DEFAULT_TTL_MS, MIN_TTL_MS), MAX_TTL_MS);
  return new Date(now.getTime() + granted);
}

/** How long a secret replaced on refresh still signs beside the new one. */
export const REPLACED_SECRET_VALID_MS = 3600_000;

/**
 * Whether `secret` is a Standard Webhooks symmetric secret as the extension requires: `whsec_` and
 * the base64 of 24 to 64 bytes.
 */
export function isSubscriptionSecret(secret: string): boolean {
  const match = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret);
  if (!match || match[1].length % 4 !== 0) return false;
  const bytes = Buffer.from(match[1], 'base64');
  return bytes.length >= 24 && bytes.length <= 64;
}

/** JSON with object keys sorted at every level: equal arguments give equal text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * A subscription's id, derived from its key (who asked, where it delivers, what it listens for), so
 * that subscribing again with the same key refreshes the same subscription, and two callers never
 * share one. It routes deliveries (the `X-MCP-Subscription-Id` header) and authorizes nothing.
 */
export function subscriptionId(owner: string, url: string, name: string, args: unknown): string {
  const digest = createHash('sha256')
    .update(canonicalJson([owner, url, name, args]))
    .digest('hex');
  return `sub_${digest.slice(0, 24)}`;
}
