import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { recordSecret } from './test-logs';

/**
 * A real OpenID provider for tests: `oidc-provider` in this process on a free loopback port, with
 * its own RS256 key, issuing JWT access tokens for one RFC 8707 resource (Alcarta's `…/mcp`).
 *
 * - Client `agent` (confidential, client_secret_basic): client credentials; its tokens have
 *   `sub` = `client_id` = `agent`.
 * - Client `mail-console` (public, PKCE): authorization code for a person; redirect
 *   `http://127.0.0.1/callback` (never served: the code is read from the redirect URL).
 * - Client `alcarta-console` (confidential, client_secret_post; public with `consoleClientPublic`),
 *   only with the `consoleRedirectUri` option: the console's own OpenID Connect sign-in (docs/approvers.md),
 *   authorization code + PKCE.
 * - Accounts `alice` (email alice@example.com, groups ["ops"]) and `bob` (email bob@example.com, no
 *   groups). `email` and `groups` are put INTO the access token (extraTokenClaims), as IdPs do with
 *   a claim mapper, because Alcarta reads them from the token, not from userinfo.
 *
 * Which Alcarta scopes a token gets follows `scopePolicy`:
 * - `per-client` (the default, as an IdP's API permissions are): the requested scopes are cut to
 *   those of the client, so a client may ask for more and still get only its own.
 * - `permissive`: every client, dynamically registered ones too, gets every Alcarta scope it asks
 *   for, `approvals:decide` and `admin` included — an IdP that trusts the resource's clients.
 * - `strict`: every client may hold only the agent scopes (`AGENT_SCOPES`); asking for any other
 *   Alcarta scope is refused with `invalid_scope` (at the authorization and the token endpoint),
 *   and a dynamically registered client is registered with the agent scopes whatever it asks for.
 * With `dynamicRegistration`, RFC 7591 registration is open at `/reg` (as MCP clients expect).
 * The provider serves both RFC 8414 and OpenID Connect discovery; with `openIdDiscoveryOnly` the
 * RFC 8414 document answers 404, as at providers that publish only OpenID Connect discovery.
 *
 * The login interaction answers a header (the `signIn` helper) or, in a browser, a small HTML form
 * with an "Account" field; consent is given without a page.
 *
 * oidc-provider is ESM only and the tests are CommonJS: it is loaded with a dynamic import.
 */

export const AGENT_CLIENT = { clientId: 'agent', clientSecret: 'agent-secret', scope: 'mail:read approvals:read' };
export const PERSON_CLIENT = {
  clientId: 'mail-console',
  redirectUri: 'http://127.0.0.1/callback',
  scope: 'mail:read approvals:read approvals:decide',
};
export const CONSOLE_CLIENT = {
  clientId: 'alcarta-console',
  clientSecret: 'alcarta-console-secret',
  scope: 'approvals:read approvals:decide',
};
/** Every Alcarta scope, and the ones an agent needs (the only ones a strict provider issues). */
export const ALCARTA_SCOPES = 'mail:read mail:send approvals:read approvals:decide mail:ingest admin';
export const AGENT_SCOPES = 'mail:read mail:send approvals:read';
const OPENID_SCOPES = 'openid offline_access email';

export type ScopePolicy = 'per-client' | 'permissive' | 'strict';

export const ACCOUNTS: Record<string, { email: string; groups?: string[] }> = {
  alice: { email: 'alice@example.com', groups: ['ops'] },
  bob: { email: 'bob@example.com' },
};

/** Header that tells the interaction handler which account signs in (the tests' "login form"). */
const ACCOUNT_HEADER = 'x-test-account';

export interface IdentityProvider {
  /** The issuer URL (`ALCARTA_OAUTH_ISSUER`), `http://127.0.0.1:<port>` without a trailing slash. */
  issuer: string;
  /** Every request the provider received, as `METHOD /path` (no query), in order. */
  requests: string[];
  /** A client-credentials access token of `agent` for the resource, asked for with `scope`. */
  clientCredentialsToken(scope?: string): Promise<string>;
  /**
   * Signs `accountId` in at an authorization URL of `mail-console` (as built by the MCP SDK or by
   * `personToken`) and consents to everything asked: follows the redirects, answering each login
   * and consent interaction, and returns the authorization code the redirect URI receives.
   */
  signIn(authorizationUrl: URL, accountId: string): Promise<string>;
  /**
   * The same walk through the provider for any client: returns the URL the provider finally sends
   * the browser to (starting with `redirectUri`, carrying `code` and `state`), without visiting it.
   */
  authorize(authorizationUrl: URL, accountId: string, redirectUri: string): Promise<URL>;
  /**
   * A JWT access token signed with the provider's own key, shaped as the test says (for tokens the
   * provider refuses to issue, e.g. without `exp`). `claims` are merged over those of an `agent`
   * client-credentials token (iss, aud, sub, client_id, scope, iat, exp); an `undefined` leaves
   * the claim out.
   */
  signAccessToken(claims?: Record<string, unknown>): Promise<string>;
  /** An access token of `accountId` through the whole authorization-code flow with PKCE. */
  personToken(accountId: string): Promise<string>;
  /**
   * Which Alcarta scopes the provider issues to `clientId` from now on (as an IdP administrator
   * changing a client's API permissions); tokens already issued keep theirs.
   */
  setClientScope(clientId: string, scope: string): void;
  close(): Promise<void>;
}

export async function startIdentityProvider({
  resource,
  openIdDiscoveryOnly = false,
  consoleRedirectUri,
  consoleClientPublic = false,
  scopePolicy = 'per-client',
  dynamicRegistration = false,
}: {
  /** The RFC 8707 resource tokens are issued for (Alcarta's public URL + `/mcp`). */
  resource: string;
  openIdDiscoveryOnly?: boolean;
  /** Registers the client `alcarta-console` with this redirect URI (`…/console/sign-in/callback`). */
  consoleRedirectUri?: string;
  /** `alcarta-console` without a secret (token_endpoint_auth_method `none`): PKCE alone. */
  consoleClientPublic?: boolean;
  scopePolicy?: ScopePolicy;
  dynamicRegistration?: boolean;
}): Promise<IdentityProvider> {
  const { default: Provider, errors } = (await import('oidc-provider')) as {
    default: new (...args: unknown[]) => any;
    errors: { InvalidTarget: new () => Error };
  };
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const KEY_ID = 'test-idp-key';
  recordSecret('identity-provider client secret', AGENT_CLIENT.clientSecret);
  recordSecret('identity-provider client secret', CONSOLE_CLIENT.clientSecret);
  const clientScopes: Record<string, string> = {
    [AGENT_CLIENT.clientId]: AGENT_CLIENT.scope,
    [PERSON_CLIENT.clientId]: PERSON_CLIENT.scope,
    [CONSOLE_CLIENT.clientId]: CONSOLE_CLIENT.scope,
  };

  const resourceScopeOf = (clientId: string): string => {
    if (scopePolicy === 'permissive') return ALCARTA_SCOPES;
    if (scopePolicy === 'strict') return AGENT_SCOPES;
    return clientScopes[clientId] ?? '';
  };
  const strictAllowed = new Set(`${OPENID_SCOPES} ${AGENT_SCOPES}`.split(' '));
  /**
   * The scope policy as client metadata: a provider knows every Alcarta scope (so it can refuse
   * one), and a strict one registers each client, static or dynamic, with the allowed ones only.
   */
  const scopeConfiguration =
    scopePolicy === 'per-client'
      ? {}
      : {
          scopes: [...`${OPENID_SCOPES} ${ALCARTA_SCOPES}`.split(' ')],
          extraClientMetadata: {
            properties: ['scope_policy'],
            validator: (_ctx: unknown, key: string, _value: unknown, metadata: { scope?: string }) => {
              if (key !== 'scope_policy' || scopePolicy !== 'strict') return;
              const asked = (metadata.scope ?? '').split(' ').filter((scope) => strictAllowed.has(scope));
              metadata.scope = (asked.length > 0 ? asked : [...strictAllowed]).join(' ');
            },
          },
        };

  const http: Server = createServer();
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: AGENT_CLIENT.clientId,
        client_secret: AGENT_CLIENT.clientSecret,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
      },
      {
        client_id: PERSON_CLIENT.clientId,
        application_type: 'native',
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: [PERSON_CLIENT.redirectUri],
      },
      ...(consoleRedirectUri
        ? [
            {
              client_id: CONSOLE_CLIENT.clientId,
              ...(consoleClientPublic
                ? { token_endpoint_auth_method: 'none' }
                : { client_secret: CONSOLE_CLIENT.clientSecret, token_endpoint_auth_method: 'client_secret_post' }),
              grant_types: ['authorization_code'],
              response_types: ['code'],
              redirect_uris: [consoleRedirectUri],
            },
          ]
        : []),
    ],
    // The `email` scope of OpenID Connect, which the console asks for.
    claims: { email: ['email'] },
    ...scopeConfiguration,
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: KEY_ID, alg: 'RS256', use: 'sig' }] },
    // Explicit lifetimes (seconds): the defaults work but print a notice each.
    ttl: { AccessToken: 600, ClientCredentials: 600, Grant: 600, IdToken: 600, Interaction: 600, Session: 600 },
    findAccount: (_ctx: unknown, sub: string) =>
      ACCOUNTS[sub] && { accountId: sub, claims: () => ({ sub, email: ACCOUNTS[sub].email }) },
    extraTokenClaims: (_ctx: unknown, token: { accountId?: string }) => {
      const account = token.accountId ? ACCOUNTS[token.accountId] : undefined;
      return account && { email: account.email, ...(account.groups && { groups: account.groups }) };
    },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // Registered clients get readable ids: a client id is public (the request log names it), and
      // oidc-provider's default (43 random base64url characters) has the shape of a secret.
      registration: { enabled: dynamicRegistration, idFactory: () => `registered-client-${randomUUID()}` },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, indicator: string, client: { clientId: string }) => {
          if (indicator !== resource) throw new errors.InvalidTarget();
          return {
            scope: resourceScopeOf(client.clientId),
            audience: resource,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  });

  /**
   * The interaction pages (login, then consent) without HTML: the account comes from a header, and
   * consent grants exactly what the prompt says is missing — what a user clicking "allow" gives.
   */
  async function interaction(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    let accountId = String(req.headers[ACCOUNT_HEADER] ?? '');
    if (details.prompt.name === 'login' && !accountId) {
      if (req.method !== 'POST') return loginForm(res);
      accountId = new URLSearchParams(await bodyOf(req)).get('account') ?? '';
    }
    if (details.prompt.name === 'login') {
      if (!ACCOUNTS[accountId]) throw new Error(`unknown test account ${JSON.stringify(accountId)}`);
      await provider.interactionFinished(req, res, { login: { accountId } }, { mergeWithLastSubmission: false });
      return;
    }
    const missing = details.prompt.details as {
      missingOIDCScope?: string[];
      missingResourceScopes?: Record<string, string[]>;
    };
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }

  /** The login page a browser sees: one field, the account's id. */
  function loginForm(res: ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(
      '<!doctype html><title>Test identity provider</title><h1>Sign in</h1>' +
        '<form method="post"><label for="account">Account</label> <input id="account" name="account">' +
        ' <button type="submit">Continue</button></form>',
    );
  }

  const requests: string[] = [];
  const callback = provider.callback();
  http.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', issuer).pathname;
    requests.push(`${req.method} ${path}`);
    if (openIdDiscoveryOnly && path === '/.well-known/oauth-authorization-server') {
      res.statusCode = 404;
      return res.end();
    }
    if (!req.url?.startsWith('/interaction/')) return callback(req, res);
    interaction(req, res).catch((err: Error) => {
      res.statusCode = 500;
      res.end(err.message);
    });
  });

  async function signIn(authorizationUrl: URL, accountId: string): Promise<string> {
    const redirect = await authorize(authorizationUrl, accountId, PERSON_CLIENT.redirectUri);
    const code = redirect.searchParams.get('code');
    if (!code) throw new Error(`sign-in refused: ${redirect.search}`);
    recordSecret('OpenID Connect code', code);
    return code;
  }

  async function authorize(authorizationUrl: URL, accountId: string, redirectUri: string): Promise<URL> {
    recordSecret('OpenID Connect state', authorizationUrl.searchParams.get('state'));
    const cookies = new Map<string, string>();
    let url = authorizationUrl;
    for (let hop = 0; hop < 10; hop++) {
      const res = await fetch(url, {
        redirect: 'manual',
        headers: {
          [ACCOUNT_HEADER]: accountId,
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
      if (url.href.startsWith(redirectUri)) return url;
    }
    throw new Error('sign-in did not reach the redirect URI in 10 redirects');
  }

  async function bodyOf(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString();
  }

  async function tokenRequest(params: Record<string, string>, authorization?: string): Promise<string> {
    const res = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(authorization && { authorization }),
      },
      body: new URLSearchParams({ resource, ...params }),
    });
    const body = (await res.json()) as { access_token?: string };
    if (res.status !== 200 || !body.access_token) throw new Error(`token request failed: ${JSON.stringify(body)}`);
    recordSecret('access token (JWT)', body.access_token);
    return body.access_token;
  }

  return {
    issuer,
    requests,
    signIn,
    authorize,
    signAccessToken: (claims = {}) => {
      const now = Math.floor(Date.now() / 1000);
      const payload = {
        iss: issuer,
        aud: resource,
        sub: AGENT_CLIENT.clientId,
        client_id: AGENT_CLIENT.clientId,
        scope: AGENT_CLIENT.scope,
        iat: now,
        exp: now + 600,
        ...claims,
      };
      return new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: KEY_ID, typ: 'at+jwt' }).sign(privateKey);
    },
    clientCredentialsToken: (scope = AGENT_CLIENT.scope) =>
      tokenRequest(
        { grant_type: 'client_credentials', scope },
        `Basic ${Buffer.from(`${AGENT_CLIENT.clientId}:${AGENT_CLIENT.clientSecret}`).toString('base64')}`,
      ),
    personToken: async (accountId) => {
      const verifier = randomBytes(32).toString('base64url');
      recordSecret('PKCE code verifier', verifier);
      const authorizationUrl = new URL('/auth', issuer);
      authorizationUrl.search = new URLSearchParams({
        client_id: PERSON_CLIENT.clientId,
        response_type: 'code',
        redirect_uri: PERSON_CLIENT.redirectUri,
        scope: PERSON_CLIENT.scope,
        resource,
        code_challenge: createHash('sha256').update(verifier).digest('base64url'),
        code_challenge_method: 'S256',
      }).toString();
      const code = await signIn(authorizationUrl, accountId);
      return tokenRequest({
        grant_type: 'authorization_code',
        client_id: PERSON_CLIENT.clientId,
        code,
        code_verifier: verifier,
        redirect_uri: PERSON_CLIENT.redirectUri,
      });
    },
    setClientScope: (clientId, scope) => {
      clientScopes[clientId] = scope;
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => http.close(() => resolve()));
      http.closeAllConnections();
      await closed;
    },
  };
}
