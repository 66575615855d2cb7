import { createPrivateKey } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { SignJWT } from 'jose';
import { AppConfig } from '../config/app-config';
import { SourceFailure } from './source-failure';
import type { SourceSettings } from './source-settings';

type Xoauth2Settings = Extract<SourceSettings['auth'], { kind: 'xoauth2' }>;

export interface Xoauth2Secrets {
  client_secret: string | null;
  refresh_token?: string;
  private_key?: string;
}

/** How long a service account's assertion is valid (Google accepts at most an hour). */
const ASSERTION_LIFETIME_SECONDS = 3600;

interface CachedToken {
  accessToken: string;
  expiresAt: number;
}

/** Refreshed when less than this share of its lifetime is left (and at least this margin). */
const REFRESH_AT_SHARE = 0.25;
const MIN_MARGIN_MS = 5000;
/** Without `expires_in` (RFC 6749 5.1 makes it optional) a token is used for this long. */
const DEFAULT_LIFETIME_MS = 10 * 60_000;
/** The longest answer of a token endpoint that is read. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * Access tokens of connected accounts that sign in with XOAUTH2, obtained at the account's
 * `token_url` with its grant (see Xoauth2Grant: a refresh token, client credentials, or a service
 * account's assertion for the account's user) and cached per mailbox until shortly before they
 * expire, so a connection or a send never presents a token about to lapse. A refused grant
 * (`invalid_grant`: revoked, expired or wrong) is an authentication failure; a provider that does
 * not answer is an unreachable one. A provider that rotates refresh tokens (Microsoft Entra ID does)
 * returns a new one, which the caller stores (`rotated`).
 */
@Injectable()
export class Xoauth2Tokens {
  private readonly cache = new Map<string, CachedToken>();
  private readonly inFlight = new Map<string, Promise<string>>();

  constructor(private readonly config: AppConfig) {}

  /**
   * An access token for the account; `cacheKey` names the mailbox and its settings' revision, so a
   * changed account never uses an old token (undefined: an account being checked, nothing cached).
   * `rotated` receives a new refresh token.
   */
  async accessToken(
    cacheKey: string | undefined,
    username: string,
    settings: Xoauth2Settings,
    secrets: Xoauth2Secrets,
    rotated: (refreshToken: string) => Promise<void>,
  ): Promise<string> {
    if (cacheKey === undefined) return this.refresh(undefined, username, settings, secrets, rotated);
    const cached = this.cache.get(cacheKey);
    if (cached && cached.expiresAt > Date.now()) return cached.accessToken;
    let refreshing = this.inFlight.get(cacheKey);
    if (!refreshing) {
      refreshing = this.refresh(cacheKey, username, settings, secrets, rotated).finally(() =>
        this.inFlight.delete(cacheKey),
      );
      this.inFlight.set(cacheKey, refreshing);
    }
    return refreshing;
  }

  /** Forgets the account's token (its provider refused it: the next connection refreshes). */
  forget(cacheKey: string): void {
    this.cache.delete(cacheKey);
  }

  private async refresh(
    cacheKey: string | undefined,
    username: string,
    settings: Xoauth2Settings,
    secrets: Xoauth2Secrets,
    rotated: (refreshToken: string) => Promise<void>,
  ): Promise<string> {
    const form = await grantForm(settings, secrets, username);
    const startedAt = Date.now();
    let response: Response;
    try {
      response = await fetch(settings.token_url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form,
        redirect: 'error',
        signal: AbortSignal.timeout(this.config.imapConnectTimeoutMs),
      });
    } catch (err) {
      throw new SourceFailure(
        'auth',
        'source_unreachable',
        `The token endpoint ${origin(settings.token_url)} could not be reached: ${causeOf(err)}.`,
      );
    }
    const body = await readJson(response);
    if (!response.ok || typeof body?.access_token !== 'string') {
      const code = typeof body?.error === 'string' ? body.error : `HTTP ${response.status}`;
      if (response.status >= 500 || response.status === 429) {
        throw new SourceFailure(
          'auth',
          'source_unreachable',
          `The token endpoint ${origin(settings.token_url)} answered ${code}; it is tried again later.`,
        );
      }
      throw new SourceFailure(
        'auth',
        'source_auth_failed',
        `The token endpoint ${origin(settings.token_url)} refused the ${GRANT_NAMES[settings.grant]} (${code}); the account's credentials must be configured again.`,
      );
    }
    const lifetimeMs = typeof body.expires_in === 'number' ? body.expires_in * 1000 : DEFAULT_LIFETIME_MS;
    const margin = Math.max(MIN_MARGIN_MS, lifetimeMs * REFRESH_AT_SHARE);
    if (cacheKey !== undefined) {
      this.cache.set(cacheKey, { accessToken: body.access_token, expiresAt: startedAt + lifetimeMs - margin });
    }
    if (
      settings.grant === 'refresh_token' &&
      typeof body.refresh_token === 'string' &&
      body.refresh_token !== secrets.refresh_token
    ) {
      await rotated(body.refresh_token);
    }
    return body.access_token;
  }
}

const GRANT_NAMES: Record<Xoauth2Settings['grant'], string> = {
  refresh_token: 'refresh token',
  client_credentials: 'client credentials',
  jwt_bearer: "service account's assertion",
};

/** The token request's form for the account's grant. */
async function grantForm(
  settings: Xoauth2Settings,
  secrets: Xoauth2Secrets,
  username: string,
): Promise<URLSearchParams> {
  const form = new URLSearchParams();
  if (settings.grant === 'jwt_bearer') {
    const now = Math.floor(Date.now() / 1000);
    // RFC 7523 2.1; Google's domain-wide delegation: the service account acts as the mailbox's user.
    const assertion = await new SignJWT({ scope: settings.scope ?? undefined })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
      .setIssuer(settings.client_id)
      .setSubject(username)
      .setAudience(settings.token_url)
      .setIssuedAt(now)
      .setExpirationTime(now + ASSERTION_LIFETIME_SECONDS)
      .sign(serviceAccountKey(secrets.private_key!));
    form.set('grant_type', 'urn:ietf:params:oauth:grant-type:jwt-bearer');
    form.set('assertion', assertion);
    return form;
  }
  form.set('grant_type', settings.grant);
  if (settings.grant === 'refresh_token') form.set('refresh_token', secrets.refresh_token!);
  form.set('client_id', settings.client_id);
  if (secrets.client_secret) form.set('client_secret', secrets.client_secret);
  if (settings.scope) form.set('scope', settings.scope);
  return form;
}

function serviceAccountKey(pem: string) {
  try {
    return createPrivateKey(pem);
  } catch {
    throw new SourceFailure(
      'auth',
      'source_auth_failed',
      "The service account's private_key cannot be read as a private key.",
    );
  }
}

async function readJson(response: Response): Promise<Record<string, unknown> | undefined> {
  try {
    const text = await response.text();
    if (text.length > MAX_RESPONSE_BYTES) return undefined;
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The token endpoint without its path: enough to tell which provider, nothing that could be secret. */
function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'of the account';
  }
}

function causeOf(err: unknown): string {
  const e = err as { name?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'no answer in time';
  return e?.cause?.code ?? e?.cause?.message ?? (err as Error)?.message ?? 'connection failed';
}
