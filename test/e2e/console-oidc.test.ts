import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Browser, BrowserContext, Page } from 'playwright-core';
import { CredentialRepository } from '#app/auth/credential.repository.js';
import { freePort } from '#app/common/net.js';
import { axeViolations, launchChromium } from '../support/browser';
import { CONSOLE_CLIENT, IdentityProvider, startIdentityProvider } from '../support/identity-provider';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const SCREENSHOTS = join(process.cwd(), 'test-output', 'screenshots');

/** Long enough for any wake-up on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 50;

/**
 * docs/approvers.md, console sign-in through OpenID Connect: a real OpenID provider (oidc-provider,
 * see test/support/identity-provider.ts) with the confidential client `alcarta-console`, a real
 * Chromium walking through the provider's login page, authorization code + PKCE by openid-client on
 * the server. The person's mailboxes come from grants (group:ops), decided_by is the email.
 */
describe('console sign-in with OpenID Connect', () => {
  let server: TestServer;
  let idp: IdentityProvider;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let agent: Client;
  let agentTokenId: string;
  let opsMailbox: string;
  let opsGrant: string;
  let opsRequest: string;
  let alice: { context: BrowserContext; page: Page };

  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };
  const url = (path: string) => `${server.url}${path}`;
  /**
   * Alcarta's own session and pending sign-in cookies in the browser (the provider, on the same
   * host, has its own; the token form's cookie, which the sign-in page sets for every visitor, is
   * not one of them).
   */
  const consoleCookies = async (context: BrowserContext) =>
    (await context.cookies(url('/console/sign-in/callback'))).filter(
      (c) => c.name.startsWith('alcarta_') && c.name !== 'alcarta_console_sign_in',
    );

  /** A fresh browser at the sign-in page, sent on to the provider's login form. */
  const atProviderLogin = async () => {
    const context = await browser!.newContext();
    const page = await context.newPage();
    let authorizationUrl: URL | undefined;
    page.on('request', (r) => {
      if (r.url().startsWith(`${idp.issuer}/auth?`)) authorizationUrl = new URL(r.url());
    });
    await page.goto(url('/console'));
    assert.equal(new URL(page.url()).pathname, '/console/sign-in');
    await page.getByRole('link', { name: `Sign in with ${new URL(idp.issuer).host}` }).click();
    await page.getByLabel('Account').waitFor();
    assert.ok(authorizationUrl, 'the browser went to the authorization endpoint');
    return { context, page, authorizationUrl };
  };

  /** Signs `account` in through the provider's login form; returns where the browser ends up. */
  const signIn = async (account: string) => {
    const started = await atProviderLogin();
    const callback = started.page.waitForResponse((r) => r.url().startsWith(url('/console/sign-in/callback')));
    await started.page.getByLabel('Account').fill(account);
    await started.page.getByRole('button', { name: 'Continue' }).click();
    return { ...started, callback: await callback };
  };

  before(async () => {
    const appUrl = `http://127.0.0.1:${await freePort()}`;
    idp = await startIdentityProvider({
      resource: `${appUrl}/mcp`,
      consoleRedirectUri: `${appUrl}/console/sign-in/callback`,
    });
    server = await startTestServer({
      env: {
        PORT: new URL(appUrl).port,
        ALCARTA_PUBLIC_URL: appUrl,
        ALCARTA_OAUTH_ISSUER: idp.issuer,
        ALCARTA_CONSOLE_CLIENT_ID: CONSOLE_CLIENT.clientId,
        ALCARTA_CONSOLE_CLIENT_SECRET: CONSOLE_CLIENT.clientSecret,
      },
    });
    opsMailbox = await createMailbox(server.admin);
    const otherMailbox = await createMailbox(server.admin);
    const granted = await server.admin.post('/v1/grants', { principal: 'group:ops', mailboxes: [opsMailbox] });
    assert.equal(granted.status, 201, JSON.stringify(granted.body));
    opsGrant = granted.body.grant_id;
    const agentToken = await createToken(server.admin, {
      name: 'Ops agent',
      scopes: ['mail:send', 'approvals:read'],
      mailboxes: [opsMailbox, otherMailbox],
    });
    agentTokenId = agentToken.id;
    agent = await connectMcp(server.url, agentToken.secret);
    ({ request_id: opsRequest } = await callOk(agent, 'request_approval', {
      mailbox_id: opsMailbox,
      title: 'Pay invoice 42',
    }));
    await callOk(agent, 'request_approval', { mailbox_id: otherMailbox, title: 'Refund order 7781' });
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    await agent?.close();
    await alice?.context.close();
    await browser?.close();
    await server?.close();
    await idp?.close();
  });

  browserIt('alice signs in at the provider and sees the request of the mailbox granted to group:ops', async () => {
    const signedIn = await signIn('alice');
    alice = signedIn;
    assert.equal(signedIn.callback.status(), 303);
    await signedIn.page.waitForURL(url('/console'));
    assert.equal(await signedIn.page.getByRole('heading', { level: 1 }).innerText(), 'Pending requests');
    assert.equal(await signedIn.page.getByRole('link', { name: 'Pay invoice 42' }).count(), 1);
    assert.equal(await signedIn.page.getByRole('link', { name: 'Refund order 7781' }).count(), 0);

    const params = signedIn.authorizationUrl.searchParams;
    assert.equal(params.get('client_id'), CONSOLE_CLIENT.clientId);
    assert.equal(params.get('redirect_uri'), url('/console/sign-in/callback'));
    assert.equal(params.get('code_challenge_method'), 'S256');
    assert.equal(params.get('resource'), url('/mcp'));
    assert.deepEqual(params.get('scope')!.split(' '), ['openid', 'email', 'approvals:read', 'approvals:decide']);
    assert.equal(params.has('code_verifier'), false, 'the verifier never leaves the server side');

    const cookies = await consoleCookies(signedIn.context);
    assert.deepEqual(
      cookies.map((c) => c.name),
      ['alcarta_console'],
      'the pending sign-in cookie is gone after the callback',
    );
    assert.equal(cookies[0].httpOnly, true);
    const [row] = await server.db.query<{ credential_id: string; lifetime: number }>(
      `SELECT credential_id, extract(epoch FROM expires_at - created_at) AS lifetime FROM console_sessions`,
    );
    assert.match(row.credential_id, /^prn_/);
    assert.ok(Math.abs(Number(row.lifetime) - 12 * 3600) < 60, '12 h, although the access token lasts 10 minutes');
  });

  browserIt('alice approves; the agent’s monitor_approval returns approved, decided by her email', async () => {
    const { page } = alice;
    await page.getByRole('link', { name: 'Pay invoice 42' }).click();
    await page.waitForURL(url(`/console/requests/${opsRequest}`));
    assert.equal(await page.locator('dd.asked-by').innerText(), `Ops agent ${agentTokenId}`);
    const waiting = callOk(agent, 'monitor_approval', { request_id: opsRequest, timeout_seconds: BLOCK });
    await waitFor('the agent’s parked wait', async () => (await activeWaits(server.url, 'request')) === 1);

    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(url(`/console/requests/${opsRequest}?notice=decided`));
    assert.equal(await page.locator('.decided-by').innerText(), 'alice@example.com');

    const result = await waiting;
    assert.equal(result.matched, true);
    assert.deepEqual(
      result.requests.map((r: { request_id: string; state: string }) => [r.request_id, r.state]),
      [[opsRequest, 'approved']],
    );
    assert.equal((await callOk(agent, 'get_request', { request_id: opsRequest })).decided_by, 'alice@example.com');
  });

  browserIt('credentials are named by email, else client id, else subject; a token by its name', async () => {
    const [{ id: alicePrincipal }] = await server.db.query<{ id: string }>(
      `SELECT id FROM principals WHERE subject = 'alice'`,
    );
    // Principals as other providers' tokens leave them: no email, or no email and no client.
    await server.db.query(
      `INSERT INTO principals (id, issuer, subject, client_id, email, claims_issued_at)
       VALUES ('prn_reportingService', $1, 'svc-7', 'reporting-app', NULL, now()),
              ('prn_subjectOnly', $1, 'svc-8', NULL, NULL, now())`,
      [idp.issuer],
    );
    const names = await server.running.app
      .get(CredentialRepository)
      .namesOf([alicePrincipal, 'prn_reportingService', 'prn_subjectOnly', agentTokenId, 'tok_unknown', 'operator']);
    assert.deepEqual(
      new Map([...names].sort()),
      new Map(
        [
          [alicePrincipal, 'alice@example.com'],
          ['prn_reportingService', 'reporting-app'],
          ['prn_subjectOnly', 'svc-8'],
          [agentTokenId, 'Ops agent'],
        ].sort() as Array<[string, string]>,
      ),
    );
    await server.db.query(`DELETE FROM principals WHERE id IN ('prn_reportingService', 'prn_subjectOnly')`);
  });

  browserIt('bob, in no group, signs in and sees the empty state', async () => {
    const bob = await signIn('bob');
    await bob.page.waitForURL(url('/console'));
    assert.match(await bob.page.locator('.empty').innerText(), /Nothing is waiting for your decision/);
    await bob.context.close();
  });

  browserIt('a callback with a state this browser did not send is refused with a page, no session', async () => {
    const started = await atProviderLogin();
    const forged = await started.page.goto(url('/console/sign-in/callback?code=stolen-code&state=forged-state'));
    assert.equal(forged!.status(), 400);
    assert.equal(await started.page.getByRole('heading', { level: 1 }).innerText(), 'Sign-in refused');
    assert.deepEqual(await consoleCookies(started.context), []);

    const unstarted = await started.page.goto(url('/console/sign-in/callback?code=x&state=y'));
    assert.equal(unstarted!.status(), 400, 'the pending sign-in was single use');
    assert.equal(await started.page.getByRole('heading', { level: 1 }).innerText(), 'Sign-in not recognised');
    await started.context.close();
  });

  browserIt('an error from the provider (access_denied) gets a clear page, not a 500', async () => {
    const started = await atProviderLogin();
    const state = started.authorizationUrl.searchParams.get('state')!;
    const denied = await started.page.goto(
      url(`/console/sign-in/callback?error=access_denied&state=${encodeURIComponent(state)}`),
    );
    assert.equal(denied!.status(), 400);
    assert.equal(
      await started.page.getByRole('heading', { level: 1 }).innerText(),
      'The identity provider did not sign you in',
    );
    assert.match(await started.page.locator('main').innerText(), /access_denied/);
    assert.equal(await started.page.getByRole('link', { name: 'Sign in again' }).count(), 1);
    assert.deepEqual(await consoleCookies(started.context), []);
    await started.context.close();
  });

  browserIt('the sign-in page and the refusal pages pass axe at desktop and phone widths', async () => {
    // bypassCSP only so that axe can be injected; the pages themselves run under the strict CSP.
    const scan = await browser!.newContext({ bypassCSP: true });
    const p = await scan.newPage();
    mkdirSync(SCREENSHOTS, { recursive: true });
    const pages = {
      'sign-in-oidc': '/console/sign-in',
      'sign-in-refused': '/console/sign-in/callback?code=x&state=y',
    };
    for (const [name, path] of Object.entries(pages)) {
      for (const width of [1280, 375]) {
        await p.setViewportSize({ width, height: 700 });
        await p.goto(url(path));
        const violations = await axeViolations(p);
        assert.deepEqual(violations, [], `${name} at ${width} px`);
        const overflow = await p.evaluate('document.documentElement.scrollWidth > window.innerWidth');
        assert.equal(overflow, false, `${name} fits ${width} px`);
        await p.screenshot({ path: join(SCREENSHOTS, `console-${name}-${width}.png`), fullPage: true });
      }
    }
    await scan.close();
  });

  browserIt('a deleted grant takes the mailbox away at the next click', async () => {
    const { page } = alice;
    await page.goto(url(`/console/requests/${opsRequest}`));
    assert.equal((await server.admin.delete(`/v1/grants/${opsGrant}`)).status, 204);
    const gone = await page.goto(url(`/console/requests/${opsRequest}`));
    assert.equal(gone!.status(), 404);
    await page.goto(url('/console'));
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Pending requests');
    assert.match(await page.locator('.empty').innerText(), /Nothing is waiting for your decision/);
  });
  browserIt('a token without approvals:decide, with no default scopes, is refused with a clear page', async () => {
    idp.setClientScope(CONSOLE_CLIENT.clientId, 'approvals:read');
    try {
      const refused = await signIn('alice');
      assert.equal(refused.callback.status(), 403);
      await refused.page.getByRole('heading', { name: 'You may not decide approvals' }).waitFor();
      assert.match(await refused.page.locator('main').innerText(), /approvals:decide/);
      assert.deepEqual(await consoleCookies(refused.context), []);
      await refused.context.close();
      // The principal's scopes are those of its newest token: alice's open session ends too.
      const ended = await alice.page.goto(url('/console'));
      assert.equal(ended!.status(), 401);
      assert.equal(await alice.page.getByRole('heading', { level: 1 }).innerText(), 'Your session ended');
    } finally {
      idp.setClientScope(CONSOLE_CLIENT.clientId, CONSOLE_CLIENT.scope);
    }
  });
});

/**
 * ALCARTA_CONSOLE_DEFAULT_SCOPES, for identity providers that cannot put Alcarta scopes into a
 * person's token; and a public client (no ALCARTA_CONSOLE_CLIENT_SECRET) that relies on PKCE alone.
 */
describe('console sign-in with OpenID Connect, public client and default scopes', () => {
  let server: TestServer;
  let idp: IdentityProvider;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let agent: Client;
  let request: string;

  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };
  const url = (path: string) => `${server.url}${path}`;

  before(async () => {
    const appUrl = `http://127.0.0.1:${await freePort()}`;
    idp = await startIdentityProvider({
      resource: `${appUrl}/mcp`,
      consoleRedirectUri: `${appUrl}/console/sign-in/callback`,
      consoleClientPublic: true,
    });
    idp.setClientScope(CONSOLE_CLIENT.clientId, 'approvals:read');
    server = await startTestServer({
      env: {
        PORT: new URL(appUrl).port,
        ALCARTA_PUBLIC_URL: appUrl,
        ALCARTA_OAUTH_ISSUER: idp.issuer,
        ALCARTA_CONSOLE_CLIENT_ID: CONSOLE_CLIENT.clientId,
        ALCARTA_CONSOLE_DEFAULT_SCOPES: 'approvals:decide',
      },
    });
    const mailbox = await createMailbox(server.admin);
    assert.equal((await server.admin.post('/v1/grants', { principal: 'sub:alice', mailboxes: [mailbox] })).status, 201);
    const agentToken = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [mailbox] });
    agent = await connectMcp(server.url, agentToken.secret);
    ({ request_id: request } = await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Ship order 9' }));
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    await agent?.close();
    await browser?.close();
    await server?.close();
    await idp?.close();
  });

  browserIt('a token with only approvals:read signs in and decides through the default scopes', async () => {
    const context = await browser!.newContext();
    const page = await context.newPage();
    await page.goto(url('/console/sign-in'));
    await page.getByRole('link', { name: `Sign in with ${new URL(idp.issuer).host}` }).click();
    await page.getByLabel('Account').fill('alice');
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.waitForURL(url('/console'));
    const [principal] = await server.db.query<{ scopes: string[] }>(`SELECT scopes FROM principals`);
    assert.deepEqual(principal.scopes, ['approvals:read'], 'the token itself cannot decide');

    await page.getByRole('link', { name: 'Ship order 9' }).click();
    await page.getByRole('button', { name: 'Reject' }).click();
    await page.waitForURL(url(`/console/requests/${request}?notice=decided`));
    const decided = await callOk(agent, 'get_request', { request_id: request });
    assert.equal(decided.state, 'rejected');
    assert.equal(decided.decided_by, 'alice@example.com');
    await context.close();
  });
});

describe('console sign-in with OpenID Connect, provider unreachable', () => {
  let server: TestServer;

  before(async () => {
    server = await startTestServer({
      env: {
        ALCARTA_OAUTH_ISSUER: `http://127.0.0.1:${await freePort()}`,
        ALCARTA_CONSOLE_CLIENT_ID: CONSOLE_CLIENT.clientId,
      },
    });
  });

  after(async () => {
    await server?.close();
  });

  it('answers the sign-in button with a page that says so, not a 500', async () => {
    const res = await fetch(`${server.url}/console/sign-in/oidc`, { redirect: 'manual' });
    assert.equal(res.status, 502);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(await res.text(), /The identity provider could not be reached/);
    assert.equal(res.headers.get('set-cookie'), null, 'no sign-in was started');
  });
});
