import {
  createLocalJWKSet,
  createRemoteJWKSet,
  errors,
  FlattenedJWSInput,
  JWSHeaderParameters,
  JWTPayload,
  jwtVerify,
} from 'jose';
import { discoverJwksUri, OAUTH_FETCH_TIMEOUT_MS } from './issuer-metadata';

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

/** Refresh the key set on an unknown `kid` at most this often (SPEC 10). */
export const JWKS_REFRESH_COOLDOWN_MS = 60_000;

/**
 * Fetched keys are trusted this long; the next token after that fetches the key set again, so a key
 * the identity provider withdrew stops verifying within this time (plus one cool-down when the
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
}

export interface VerifiedAccessToken {
  payload: JWTPayload & { sub: string };
  expiresAt: Date | null;
}

type RemoteKeySet = ReturnType<typeof createRemoteJWKSet>;
type LocalKeySet = ReturnType<typeof createLocalJWKSet>;

/**
 * The issuer's keys, fetched from its JWKS endpoint: again when they are older than the maximum
 * age, and on an unknown `kid` (at most once per cool-down). When a refresh fails (endpoint down,
 * timeout, not a key set), the keys of the last successful fetch keep verifying and the endpoint is
 * asked again only after the cool-down: an outage of the identity provider does not lock every
 * agent out at once, nor make every request wait for a fetch timeout. A key is dropped as soon as
 * the endpoint answers without it; tokens signed by a key it never served fail closed.
 */
class IssuerKeys {
  private readonly remote: RemoteKeySet;
  /** The last fetched keys, while the endpoint does not answer. */
  private lastKnown: LocalKeySet | undefined;
  private refreshFailedAt = -Infinity;

  constructor(
    url: URL,
    private readonly timing: KeySetTiming,
  ) {
    this.remote = createRemoteJWKSet(url, {
      cooldownDuration: timing.refreshCooldownMs,
      cacheMaxAge: timing.maxAgeMs,
      timeoutDuration: OAUTH_FETCH_TIMEOUT_MS,
    });
  }

  /** jose's key resolver (`jwtVerify(token, keys.resolve)`). */
  readonly resolve = async (header: JWSHeaderParameters, token: FlattenedJWSInput) => {
    if (this.lastKnown && Date.now() - this.refreshFailedAt < this.timing.refreshCooldownMs) {
      return this.lastKnown(header, token);
    }
    try {
      const key = await this.remote(header, token);
      this.lastKnown = undefined;
      return key;
    } catch (err) {
      // Fresh keys answered (an unknown kid, a wrong algorithm…), or none were ever fetched: that stands.
      const known = this.remote.fresh ? undefined : this.remote.jwks();
      if (!known) throw err;
      this.refreshFailedAt = Date.now();
      this.lastKnown = createLocalJWKSet(known);
      return this.lastKnown(header, token);
    }
  };
}

/** Verifies JWT access tokens of one issuer with the keys of its JWKS endpoint (see IssuerKeys). */
export class AccessTokenVerifier {
  private keySet: Promise<IssuerKeys> | undefined;

  constructor(
    private readonly settings: VerifierSettings,
    private readonly timing: KeySetTiming = { maxAgeMs: JWKS_MAX_AGE_MS, refreshCooldownMs: JWKS_REFRESH_COOLDOWN_MS },
  ) {}

  /** The verified token, or null when it is not one this server accepts (for any reason). */
  async verify(token: string): Promise<VerifiedAccessToken | null> {
    let keys: IssuerKeys;
    try {
      keys = await this.keys();
    } catch {
      return null;
    }
    try {
      const { payload } = await jwtVerify(token, keys.resolve, {
        issuer: this.settings.issuer,
        audience: [...this.settings.audiences],
        algorithms: [...ACCEPTED_ALGORITHMS],
        clockTolerance: 60,
      });
      if (typeof payload.sub !== 'string' || payload.sub.length === 0) return null;
      return {
        payload: payload as VerifiedAccessToken['payload'],
        expiresAt: typeof payload.exp === 'number' ? new Date(payload.exp * 1000) : null,
      };
    } catch (err) {
      if (err instanceof errors.JOSEError || err instanceof TypeError) return null;
      throw err;
    }
  }

  /** Discovery is retried on the next token when it failed, so a late IdP does not need a restart. */
  private keys(): Promise<IssuerKeys> {
    this.keySet ??= this.createKeySet().catch((err: unknown) => {
      this.keySet = undefined;
      throw err;
    });
    return this.keySet;
  }

  private async createKeySet(): Promise<IssuerKeys> {
    const url = this.settings.jwksUrl ? new URL(this.settings.jwksUrl) : await discoverJwksUri(this.settings.issuer);
    return new IssuerKeys(url, this.timing);
  }
}
