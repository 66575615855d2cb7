import { createHash, randomBytes } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
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
 *   only with the `consoleRedirectUri` option: the console's own OpenID Connect sign-in (SPEC 11),
 *   authorization code + PKCE.
 * - Accounts `alice` (email alice@example.com, groups ["ops"]) and `bob` (email bob@example.com, no
 *   groups). `email` and `groups` are put INTO the access token (extraTokenClaims), as IdPs do with
 *   a claim mapper, because Alcarta reads them from the token, not from userinfo.
 *
 * Which Alcarta scopes a token gets is decided per client (as an IdP's API permissions are): the
 * requested scopes are cut to those of the client, so a client may ask for everything the RFC 9728
 * document lists (as the MCP SDK does in the authorization-code flow) and still get only its own.
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
}: {
  /** The RFC 8707 resource tokens are issued for (Alcarta's public URL + `/mcp`). */
  resource: string;
  openIdDiscoveryOnly?: boolean;
  /** Registers the client `alcarta-console` with this redirect URI (`…/console/sign-in/callback`). */
  consoleRedirectUri?: string;
  /** `alcarta-console` without a secret (token_endpoint_auth_method `none`): PKCE alone. */
  consoleClientPublic?: boolean;
}): Promise<IdentityProvider> {
  const { default: Provider, errors } = (await import('oidc-provider')) as {
    default: new (...args: unknown[]) => any;
    errors: { InvalidTarget: new () => Error };
  };
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  recordSecret('identity-provider client secret', AGENT_CLIENT.clientSecret);
  recordSecret('identity-provider client secret', CONSOLE_CLIENT.clientSecret);
  const clientScopes: Record<string, string> = {
    [AGENT_CLIENT.clientId]: AGENT_CLIENT.scope,
    [PERSON_CLIENT.clientId]: PERSON_CLIENT.scope,
    [CONSOLE_CLIENT.clientId]: CONSOLE_CLIENT.scope,
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
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: 'test-idp-key', alg: 'RS256', use: 'sig' }] },
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
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, indicator: string, client: { clientId: string }) => {
          if (indicator !== resource) throw new errors.InvalidTarget();
          return {
            scope: clientScopes[client.clientId] ?? '',
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
      if (url.href.startsWith(PERSON_CLIENT.redirectUri)) {
        const code = url.searchParams.get('code');
        if (!code) throw new Error(`sign-in refused: ${url.search}`);
        recordSecret('OpenID Connect code', code);
        return code;
      }
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
