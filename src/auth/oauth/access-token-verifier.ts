import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  FlattenedJWSInput,
  JSONWebKeySet,
  JWSHeaderParameters,
  JWTPayload,
  jwtVerify,
} from 'jose';
import { IdentityProviderOutage } from './identity-provider-outage';
import { discoverJwksUri, fetchFailure, fetchJson } from './issuer-metadata';
import { CLOCK_SKEW_SECONDS, withinValidity } from './token-validity';

/** Only asymmetric signatures: `none` and HS* (where the public key could serve as the secret) never verify. */
export const ACCEPTED_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;

/** Refresh the key set on an unknown `kid` at most this often (docs/operators.md, "Identity providers"). */
export const JWKS_REFRESH_COOLDOWN_MS = 60_000;

/**
 * Fetched keys are trusted this long; the next token after that fetches the key set again, so a key
 * the identity provider withdrew stops verifying within this time (plus one backoff when the
 * JWKS endpoint was down meanwhile).
 */
export const JWKS_MAX_AGE_MS = 10 * 60_000;

export interface KeySetTiming {
  maxAgeMs: number;
  refreshCooldownMs: number;
}

export interface VerifierSettings {
  issuer: string;
  jwksUrl: string | undefined;
  audiences: readonly string[];
  /** How long a failed fetch from the issuer is remembered (see IdentityProviderOutage). */
  failureBackoffMs: number;
  /** The furthest a token's `exp` may lie ahead. */
  maxTokenLifetimeSeconds: number;
}

export interface VerifiedAccessToken {
  payload: JWTPayload & { sub: string; exp: number };
  expiresAt: Date;
}

type KeySet = ReturnType<typeof createLocalJWKSet>;

/**
 * The issuer's keys, fetched from its JWKS endpoint: again when they are older than the maximum
 * age, and on an unknown `kid` (at most once per cool-down). One fetch serves every request that
 * needs it meanwhile. When a fetch fails, the failure is remembered (IdentityProviderOutage): the
 * keys of the last successful fetch keep verifying the tokens they can, and a token that needs the
 * endpoint (no keys yet, or a `kid` they lack) is refused at once with identity_provider_unavailable,
 * until the backoff has passed. A key is dropped as soon as the endpoint answers without it.
 */
class IssuerKeys {
  private keys: KeySet | undefined;
  private fetchedAt = -Infinity;
  private fetching: Promise<boolean> | undefined;

  constructor(
    private readonly url: URL,
    private readonly timing: KeySetTiming,
    private readonly outage: IdentityProviderOutage,
  ) {}

  /** jose's key resolver (`jwtVerify(token, keys.resolve)`). */
  readonly resolve = async (header: JWSHeaderParameters, token: FlattenedJWSInput) => {
    const current = this.age() < this.timing.maxAgeMs || (await this.refresh());
    if (!this.keys) throw this.outage.unavailable();
    try {
      return await this.keys(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      // Keys fetched within the cool-down stand: an unknown kid is refused without asking again.
      if (current && this.age() < this.timing.refreshCooldownMs) throw err;
      if (!(await this.refresh())) throw this.outage.unavailable();
      return this.keys(header, token);
    }
  };

  private age(): number {
    return Date.now() - this.fetchedAt;
  }

  /** Whether the keys are now fresh from the endpoint; false while a failure is remembered. */
  private refresh(): Promise<boolean> {
    if (this.outage.ongoing) return Promise.resolve(false);
    this.fetching ??= this.fetch().finally(() => (this.fetching = undefined));
    return this.fetching;
  }

  private async fetch(): Promise<boolean> {
    try {
      this.keys = createLocalJWKSet((await fetchJson(this.url)) as JSONWebKeySet);
      this.fetchedAt = Date.now();
      return true;
    } catch (err) {
      this.outage.failed(`the key set ${this.url.href}`, fetchFailure(err));
      return false;
    }
  }
}

/** Verifies JWT access tokens of one issuer with the keys of its JWKS endpoint (see IssuerKeys). */
export class AccessTokenVerifier {
  private readonly outage: IdentityProviderOutage;
  private issuerKeys: IssuerKeys | undefined;
  private discovery: Promise<IssuerKeys> | undefined;

  constructor(
    private readonly settings: VerifierSettings,
    private readonly timing: KeySetTiming = { maxAgeMs: JWKS_MAX_AGE_MS, refreshCooldownMs: JWKS_REFRESH_COOLDOWN_MS },
  ) {
    this.outage = new IdentityProviderOutage(settings.failureBackoffMs);
  }

  /**
   * The verified token, or null when it is not one this server accepts (for any reason). Throws
   * identity_provider_unavailable when the keys to check it cannot be had from the issuer now.
   */
  async verify(token: string): Promise<VerifiedAccessToken | null> {
    // Refused without the issuer's keys (also while it is down): what no signature could make valid.
    if (!this.couldBeValid(token)) return null;
    const keys = await this.keys();
    try {
      const { payload } = await jwtVerify(token, keys.resolve, {
        issuer: this.settings.issuer,
        audience: [...this.settings.audiences],
        algorithms: [...ACCEPTED_ALGORITHMS],
        clockTolerance: CLOCK_SKEW_SECONDS,
        requiredClaims: ['exp'],
      });
      if (typeof payload.sub !== 'string' || payload.sub.length === 0) return null;
      const verified = payload as VerifiedAccessToken['payload'];
      return { payload: verified, expiresAt: new Date(verified.exp * 1000) };
    } catch (err) {
      if (err instanceof errors.JOSEError || err instanceof TypeError) return null;
      throw err;
    }
  }

  /**
   * The checks that need no key, on the token's claims as they stand (the signature, checked next,
   * covers these same bytes): a JWT of an accepted algorithm, for this issuer and audience, with
   * time claims that hold (see withinValidity).
   */
  private couldBeValid(token: string): boolean {
    let claims: JWTPayload;
    try {
      const { alg } = decodeProtectedHeader(token);
      if (!ACCEPTED_ALGORITHMS.some((accepted) => accepted === alg)) return false;
      claims = decodeJwt(token);
    } catch {
      return false;
    }
    const audiences = typeof claims.aud === 'string' ? [claims.aud] : (claims.aud ?? []);
    return (
      claims.iss === this.settings.issuer &&
      audiences.some((aud) => this.settings.audiences.includes(aud)) &&
      withinValidity(claims, Date.now() / 1000, this.settings.maxTokenLifetimeSeconds)
    );
  }

  /** Discovery is tried again after a failure (once the backoff has passed), so a late IdP needs no restart. */
  private keys(): Promise<IssuerKeys> {
    if (this.issuerKeys) return Promise.resolve(this.issuerKeys);
    if (this.outage.ongoing) return Promise.reject(this.outage.unavailable());
    this.discovery ??= this.discover().finally(() => (this.discovery = undefined));
    return this.discovery;
  }

  private async discover(): Promise<IssuerKeys> {
    let url: URL;
    try {
      url = this.settings.jwksUrl ? new URL(this.settings.jwksUrl) : await discoverJwksUri(this.settings.issuer);
    } catch (err) {
      this.outage.failed("the issuer's metadata", fetchFailure(err));
      throw this.outage.unavailable();
    }
    this.issuerKeys = new IssuerKeys(url, this.timing, this.outage);
    return this.issuerKeys;
  }
}
