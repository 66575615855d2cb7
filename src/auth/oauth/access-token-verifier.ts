import { createRemoteJWKSet, errors, JWTPayload, jwtVerify } from 'jose';
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

export interface VerifierSettings {
  issuer: string;
  jwksUrl: string | undefined;
  audiences: readonly string[];
}

export interface VerifiedAccessToken {
  payload: JWTPayload & { sub: string };
  expiresAt: Date | null;
}

type KeySet = ReturnType<typeof createRemoteJWKSet>;

/**
 * Verifies JWT access tokens of one issuer. The key set is fetched once and then only when a token
 * names a `kid` it does not hold (at most once a minute), never because it aged: so an unreachable
 * JWKS endpoint leaves the known keys working while tokens signed by new keys fail closed.
 */
export class AccessTokenVerifier {
  private keySet: Promise<KeySet> | undefined;

  constructor(private readonly settings: VerifierSettings) {}

  /** The verified token, or null when it is not one this server accepts (for any reason). */
  async verify(token: string): Promise<VerifiedAccessToken | null> {
    let keys: KeySet;
    try {
      keys = await this.keys();
    } catch {
      return null;
    }
    try {
      const { payload } = await jwtVerify(token, keys, {
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
  private keys(): Promise<KeySet> {
    this.keySet ??= this.createKeySet().catch((err: unknown) => {
      this.keySet = undefined;
      throw err;
    });
    return this.keySet;
  }

  private async createKeySet(): Promise<KeySet> {
    const url = this.settings.jwksUrl ? new URL(this.settings.jwksUrl) : await discoverJwksUri(this.settings.issuer);
    return createRemoteJWKSet(url, {
      cooldownDuration: JWKS_REFRESH_COOLDOWN_MS,
      cacheMaxAge: Infinity,
      timeoutDuration: OAUTH_FETCH_TIMEOUT_MS,
    });
  }
}
