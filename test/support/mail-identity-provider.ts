import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { recordSecret } from './test-logs';

/**
 * A real OAuth 2.0 server for IMAP XOAUTH2, as Microsoft Entra ID or Google are for a mailbox:
 * `oidc-provider` in this process on a free loopback port.
 *
 * - Client `alcarta-imap` (confidential, client_secret_basic or _post): authorization code (to get
 *   the first refresh token, as a person's consent does) and refresh_token; scope `imap offline_access`.
 *   Its access tokens are opaque and short-lived (`accessTokenSeconds`), so tests see refreshes.
 * - Client `dovecot` (confidential): only introspects tokens (RFC 7662), as the IMAP server does
 *   for every XOAUTH2 sign-in; an active token's `sub` is the account id, which IS the IMAP username.
 * - Every account id exists: signing in as `support@example.test` makes that account.
 *
 * oidc-provider is ESM only and the tests are CommonJS: it is loaded with a dynamic import.
 */

export const IMAP_CLIENT = {
  clientId: 'alcarta-imap',
  clientSecret: 'alcarta-imap-secret',
  redirectUri: 'http://127.0.0.1/imap-callback',
  scope: 'imap offline_access',
};
export const INTROSPECTION_CLIENT = { clientId: 'dovecot', clientSecret: 'dovecot-secret' };

/** Header that tells the interaction handler which account signs in (the tests' "login form"). */
const ACCOUNT_HEADER = 'x-test-account';

export interface TokenEndpointCall {
  /** The `grant_type` asked for (`refresh_token`, `authorization_code`, ...). */
  grant_type: string;
  /** When the call was answered (ms since the epoch). */
  at: number;
  /** The HTTP status of the answer (200 when a token was issued). */
  status: number;
}

export interface MailIdentityProvider {
  /** `http://127.0.0.1:<port>`. */
  issuer: string;
  /** The token endpoint: the source's `auth.xoauth2.token_url`. */
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  scope: string;
  /** The introspection URL for Dovecot (`options.oauth2.introspectionUrl`), credentials included. */
  introspectionUrl: string;
  /** Every token-endpoint call, in order (count `grant_type === 'refresh_token'` for refreshes). */
  grants: TokenEndpointCall[];
  /** A refresh token of `username`, through the authorization-code flow (sign-in and consent). */
  refreshTokenFor(username: string): Promise<string>;
  /**
   * An access token from the refresh-token grant, as a mail client gets one before signing in. With
   * `rotateRefreshTokens` this consumes `refreshToken` (the new one is not returned; using a consumed
   * one again revokes the whole grant, as oidc-provider does against replay).
   */
  accessTokenFrom(refreshToken: string): Promise<string>;
  /** Revokes a refresh token (RFC 7009), and with it its grant: its access tokens stop being active. */
  revoke(refreshToken: string): Promise<void>;
  close(): Promise<void>;
}

export async function startMailIdentityProvider({
  accessTokenSeconds = 60,
  rotateRefreshTokens = false,
}: {
  /** Lifetime of access tokens (Entra ID and Google use about an hour; tests want less). */
  accessTokenSeconds?: number;
  /** Issue a new refresh token at each refresh (as Entra ID does); Google keeps the same one. */
  rotateRefreshTokens?: boolean;
} = {}): Promise<MailIdentityProvider> {
  const { default: Provider } = (await import('oidc-provider')) as { default: new (...args: unknown[]) => any };
  recordSecret('mail identity-provider client secret', IMAP_CLIENT.clientSecret);
  recordSecret('mail identity-provider client secret', INTROSPECTION_CLIENT.clientSecret);

  const http: Server = createServer();
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const port = (http.address() as AddressInfo).port;
  const issuer = `http://127.0.0.1:${port}`;

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: IMAP_CLIENT.clientId,
        client_secret: IMAP_CLIENT.clientSecret,
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        redirect_uris: [IMAP_CLIENT.redirectUri],
        // Mail clients send the secret either way: basic (RFC 6749's preference) or in the body.
        token_endpoint_auth_method: 'client_secret_basic',
      },
      {
        client_id: INTROSPECTION_CLIENT.clientId,
        client_secret: INTROSPECTION_CLIENT.clientSecret,
        grant_types: [],
        response_types: [],
        redirect_uris: [],
      },
    ],
    clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
    scopes: ['openid', 'offline_access', 'imap'],
    ttl: {
      AccessToken: accessTokenSeconds,
      RefreshToken: 24 * 3600,
      AuthorizationCode: 60,
      Grant: 24 * 3600,
      IdToken: 600,
      Interaction: 600,
      Session: 600,
    },
    findAccount: (_ctx: unknown, sub: string) => ({ accountId: sub, claims: () => ({ sub }) }),
    // A refresh token for this client whenever it may use one (no `prompt=consent` dance needed).
    issueRefreshToken: (_ctx: unknown, client: { grantTypeAllowed(type: string): boolean }) =>
      client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: () => rotateRefreshTokens,
    pkce: { required: () => false },
    features: {
      devInteractions: { enabled: false },
      // Only the IMAP server reads tokens, as at a real provider where introspection is for resource servers.
      introspection: {
        enabled: true,
        allowedPolicy: (_ctx: unknown, client: { clientId: string }) =>
          client.clientId === INTROSPECTION_CLIENT.clientId,
      },
      // A client revokes only its own tokens (RFC 7009 section 2.1).
      revocation: {
        enabled: true,
        allowedPolicy: (_ctx: unknown, client: { clientId: string }, token: { clientId: string }) =>
          client.clientId === token.clientId,
      },
    },
  });

  const grants: TokenEndpointCall[] = [];
  provider.use(async (ctx: any, next: () => Promise<void>) => {
    await next();
    if (ctx.oidc?.route === 'token') {
      grants.push({ grant_type: String(ctx.oidc.params?.grant_type ?? ''), at: Date.now(), status: ctx.status });
    }
  });

  /** Login from the header, then consent to exactly what the prompt says is missing. */
  async function interaction(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login') {
      const accountId = String(req.headers[ACCOUNT_HEADER] ?? '');
      if (!accountId) throw new Error('no account to sign in');
      await provider.interactionFinished(req, res, { login: { accountId } }, { mergeWithLastSubmission: false });
      return;
    }
    const missing = details.prompt.details as { missingOIDCScope?: string[] };
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }

  const callback = provider.callback();
  http.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!req.url?.startsWith('/interaction/')) return callback(req, res);
    interaction(req, res).catch((err: Error) => {
      res.statusCode = 500;
      res.end(err.message);
    });
  });

  const clientAuthorization = `Basic ${Buffer.from(`${IMAP_CLIENT.clientId}:${IMAP_CLIENT.clientSecret}`).toString('base64')}`;

  async function tokenRequest(
    params: Record<string, string>,
  ): Promise<{ access_token: string; refresh_token?: string }> {
    const res = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: clientAuthorization },
      body: new URLSearchParams(params),
    });
    const body = (await res.json()) as { access_token?: string; refresh_token?: string };
    if (res.status !== 200 || !body.access_token) throw new Error(`token request failed: ${JSON.stringify(body)}`);
    recordSecret('IMAP access token', body.access_token);
    recordSecret('IMAP refresh token', body.refresh_token);
    return { access_token: body.access_token, refresh_token: body.refresh_token };
  }

  /** Walks the authorization request as a browser would, signing in as `username`; returns the code. */
  async function authorizationCode(username: string): Promise<string> {
    const cookies = new Map<string, string>();
    let url = new URL('/auth', issuer);
    url.search = new URLSearchParams({
      client_id: IMAP_CLIENT.clientId,
      response_type: 'code',
      redirect_uri: IMAP_CLIENT.redirectUri,
      scope: IMAP_CLIENT.scope,
      prompt: 'consent',
    }).toString();
    for (let hop = 0; hop < 10; hop++) {
      const res = await fetch(url, {
        redirect: 'manual',
        headers: {
          [ACCOUNT_HEADER]: username,
          cookie: [...cookies].map(([name, value]) => `${name}=${value}`).join('; '),
        },
      });
      for (const header of res.headers.getSetCookie()) {
        const [pair] = header.split(';');
        const eq = pair.indexOf('=');
        cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1));
      }
      const location = res.headers.get('location');
      if (!location) throw new Error(`sign-in stopped at ${url.href}: ${res.status} ${await res.text()}`);
      await res.body?.cancel();
      url = new URL(location, url);
      if (url.href.startsWith(IMAP_CLIENT.redirectUri)) {
        const code = url.searchParams.get('code');
        if (!code) throw new Error(`sign-in refused: ${url.search}`);
        recordSecret('authorization code', code);
        return code;
      }
    }
    throw new Error('sign-in did not reach the redirect URI in 10 redirects');
  }

  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    clientId: IMAP_CLIENT.clientId,
    clientSecret: IMAP_CLIENT.clientSecret,
    scope: IMAP_CLIENT.scope,
    introspectionUrl: `http://${INTROSPECTION_CLIENT.clientId}:${INTROSPECTION_CLIENT.clientSecret}@127.0.0.1:${port}/token/introspection`,
    grants,
    refreshTokenFor: async (username) => {
      const code = await authorizationCode(username);
      const tokens = await tokenRequest({
        grant_type: 'authorization_code',
        code,
        redirect_uri: IMAP_CLIENT.redirectUri,
      });
      if (!tokens.refresh_token) throw new Error('the authorization-code grant issued no refresh token');
      return tokens.refresh_token;
    },
    accessTokenFrom: async (refreshToken) =>
      (await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken })).access_token,
    revoke: async (refreshToken) => {
      const res = await fetch(`${issuer}/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: clientAuthorization },
        body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token' }),
      });
      if (res.status !== 200) throw new Error(`revocation failed: ${res.status} ${await res.text()}`);
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => http.close(() => resolve()));
      http.closeAllConnections();
      await closed;
    },
  };
}
