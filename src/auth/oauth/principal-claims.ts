import { createHash } from 'node:crypto';
import { isScope, Scope } from '../../kernel/scopes';

/** The part of the OAuth settings that turns a token's claims into Alcarta scopes. */
export interface ScopeMapping {
  scopePrefix: string;
  allowAdmin: boolean;
}

/**
 * The Alcarta scopes a token carries: its `scope` (space-separated) or `scp` (array) claim, each
 * with the configured prefix removed; anything else the authorization server issued is ignored.
 * `admin` is dropped unless the installation opted in, so an IdP misconfiguration cannot make an
 * agent an administrator.
 */
export function mapScopes(claims: Record<string, unknown>, mapping: ScopeMapping): Set<Scope> {
  const raw = claimValues(claims.scope ?? claims.scp);
  const scopes = new Set<Scope>();
  for (const value of raw) {
    if (mapping.scopePrefix && !value.startsWith(mapping.scopePrefix)) continue;
    const name = value.slice(mapping.scopePrefix.length);
    if (!isScope(name)) continue;
    if (name === 'admin' && !mapping.allowAdmin) continue;
    scopes.add(name);
  }
  return scopes;
}

/** A claim that is a space-separated string or an array of strings, as a list (anything else: empty). */
export function claimValues(value: unknown): string[] {
  if (typeof value === 'string') return value.split(' ').filter((v) => v.length > 0);
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string' && v.length > 0);
  return [];
}

/**
 * The OAuth client a token was issued to: `azp` (OpenID Connect), else `client_id` (RFC 9068), else
 * `cid` (Okta's access tokens). Only a non-empty string counts, so a malformed claim cannot stand in
 * for the next one or match a grant to an empty client name.
 */
export function clientIdOf(claims: Record<string, unknown>): string | null {
  for (const claim of [claims.azp, claims.client_id, claims.cid]) {
    if (typeof claim === 'string' && claim.length > 0) return claim;
  }
  return null;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * The binding id of an OAuth principal (`prn_` + 22 base62 characters of sha256(iss "\n" sub)):
 * stable across its access tokens, so waits, tickets and tasks survive a token refresh
 * (docs/operators.md, "Identity providers").
 */
export function principalId(issuer: string, subject: string): string {
  let n = BigInt('0x' + createHash('sha256').update(`${issuer}\n${subject}`).digest('hex'));
  let out = '';
  for (let i = 0; i < 22; i++) {
    out += BASE62[Number(n % 62n)];
    n /= 62n;
  }
  return `prn_${out}`;
}
