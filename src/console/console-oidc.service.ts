import { Injectable, Logger } from '@nestjs/common';
import { timingSafeEqual } from 'node:crypto';
import type * as OpenIdClient from 'openid-client' with { 'resolution-mode': 'import' };
import { Caller } from '../kernel/caller';
import { OAuthAuthenticator } from '../auth/oauth/oauth-authenticator.service';
import { AlcartaError } from '../kernel/errors';
import { AppConfig } from '../config/app-config';
import { ConsoleSessionService } from './console-session.service';

/** What the browser keeps between leaving for the provider and coming back (a short-lived cookie). */
export interface PendingSignIn {
  readonly state: string;
  readonly codeVerifier: string;
}

export type OidcProblem =
  /** The callback came without the cookie of a sign-in this browser started (expired, other browser). */
  | 'not_started'
  /** The callback's `state` is not the one this browser sent: forged, or an old tab. */
  | 'wrong_state'
  /** The provider answered with an error (the person said no, or the provider refused the client). */
  | 'refused_at_provider'
  /** The code could not be exchanged, or the access token is not one Alcarta accepts. */
  | 'exchange_failed'
  /** The access token could not be checked: the provider's metadata or keys cannot be fetched now. */
  | 'provider_unavailable'
  /** The person may not decide: approvals:decide is neither in the token nor in the default scopes. */
  | 'missing_scope';

export type OidcCallbackResult =
  | { readonly ok: true; readonly secret: string; readonly expiresAt: Date }
  | { readonly ok: false; readonly problem: OidcProblem; readonly providerError?: string };

/** openid-client (loaded once, it is ESM only) and the provider's configuration from discovery. */
interface Discovered {
  readonly lib: typeof OpenIdClient;
  readonly config: OpenIdClient.Configuration;
}

/** The Alcarta scopes the console asks for: deciding, and reading what it decides. */
const CONSOLE_SCOPES = ['approvals:read', 'approvals:decide'];

/**
 * OpenID Connect sign-in to the console (docs/approvers.md): authorization code with PKCE at the configured
 * issuer, for an access token whose audience is Alcarta (RFC 8707 resource `<public URL>/mcp`).
 * That token goes through the same OAuthAuthenticator as any MCP request, which records the
 * principal; the session then holds the principal (`prn_…`), not the token, so the grants of the
 * moment decide what each click sees and the token's expiry does not end the session.
 */
@Injectable()
export class ConsoleOidcService {
  private readonly logger = new Logger('ConsoleOidc');
  /** Discovery, once per process; forgotten when it fails so that the next sign-in tries again. */
  private configuration: Promise<Discovered> | undefined;

  constructor(
    private readonly config: AppConfig,
    private readonly oauth: OAuthAuthenticator,
    private readonly sessions: ConsoleSessionService,
  ) {}

  get enabled(): boolean {
    return this.config.consoleOidc !== undefined;
  }

  /** How the sign-in page names the provider: the issuer's host. */
  get providerName(): string {
    return this.config.oauth ? new URL(this.config.oauth.issuer).host : '';
  }

  get redirectUri(): string {
    return `${this.config.publicUrl}/console/sign-in/callback`;
  }

  /**
   * The provider's authorization URL, and what the browser must bring back to finish; undefined
   * when the provider cannot be reached (its discovery document fails), which the page says.
   */
  async start(): Promise<{ authorizationUrl: URL; pending: PendingSignIn } | undefined> {
    let discovered: Discovered;
    try {
      discovered = await this.discovered();
    } catch (err) {
      this.logger.warn(
        `discovery of the identity provider failed: ${err instanceof Error ? err.message : String(err)}`,
      );
      return undefined;
    }
    const { lib, config } = discovered;
    const pending = { state: lib.randomState(), codeVerifier: lib.randomPKCECodeVerifier() };
    const prefix = this.config.oauth?.scopePrefix ?? '';
    const authorizationUrl = lib.buildAuthorizationUrl(config, {
      redirect_uri: this.redirectUri,
      response_type: 'code',
      scope: ['openid', 'email', ...CONSOLE_SCOPES.map((s) => prefix + s)].join(' '),
      resource: `${this.config.publicUrl}/mcp`,
      state: pending.state,
      code_challenge: await lib.calculatePKCECodeChallenge(pending.codeVerifier),
      code_challenge_method: 'S256',
    });
    return { authorizationUrl, pending };
  }

  /** Finishes a sign-in at the callback (`search` is its query string) into a console session. */
  async finish(search: string, pending: PendingSignIn | undefined): Promise<OidcCallbackResult> {
    if (!pending) return { ok: false, problem: 'not_started' };
    const currentUrl = new URL(this.redirectUri);
    currentUrl.search = search;
    const params = currentUrl.searchParams;
    if (!sameText(params.get('state') ?? '', pending.state)) return { ok: false, problem: 'wrong_state' };
    const providerError = params.get('error');
    if (providerError !== null) {
      // Shown on the page: only an RFC 6749 error code, never free text someone put into a link.
      const code = /^[a-z_]{1,64}$/.test(providerError) ? providerError : 'error';
      return { ok: false, problem: 'refused_at_provider', providerError: code };
    }

    let accessToken: string;
    try {
      const { lib, config } = await this.discovered();
      const tokens = await lib.authorizationCodeGrant(config, currentUrl, {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: pending.state,
      });
      accessToken = tokens.access_token;
    } catch (err) {
      this.logger.warn(`code exchange failed: ${err instanceof Error ? err.message : String(err)}`);
      return { ok: false, problem: 'exchange_failed' };
    }
    let caller: Caller | null;
    try {
      caller = await this.oauth.authenticate(accessToken);
    } catch (err) {
      if (err instanceof AlcartaError && err.code === 'identity_provider_unavailable') {
        return { ok: false, problem: 'provider_unavailable' };
      }
      throw err;
    }
    if (!caller) {
      this.logger.warn('the access token of a console sign-in was not accepted (audience, issuer or key)');
      return { ok: false, problem: 'exchange_failed' };
    }
    const started = await this.sessions.signInAsPrincipal(caller);
    return started.ok
      ? started
      : { ok: false, problem: started.problem === 'missing_scope' ? 'missing_scope' : 'exchange_failed' };
  }

  private discovered(): Promise<Discovered> {
    this.configuration ??= this.discover();
    this.configuration.catch(() => (this.configuration = undefined));
    return this.configuration;
  }

  private async discover(): Promise<Discovered> {
    const client = this.config.consoleOidc;
    const issuer = this.config.oauth?.issuer;
    if (!client || !issuer) throw new Error('OpenID Connect sign-in is not configured');
    // openid-client 6 is ESM only; this file is CommonJS.
    const lib = await import('openid-client');
    const issuerUrl = new URL(issuer);
    const config = await lib.discovery(
      issuerUrl,
      client.clientId,
      client.clientSecret,
      client.clientSecret ? lib.ClientSecretPost(client.clientSecret) : lib.None(),
      // An issuer configured as http:// (a local provider) is the operator's choice, as for the MCP path.
      issuerUrl.protocol === 'http:' ? { execute: [lib.allowInsecureRequests] } : undefined,
    );
    return { lib, config };
  }
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
