import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Browser, BrowserContext, Page } from 'playwright-core';
import { freePort } from '#app/common/net.js';
import { axeViolations, launchChromium } from '../support/browser';
import { signInForm } from '../support/console';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const SCREENSHOTS = join(process.cwd(), 'test-output', 'screenshots');
const ONE_PIXEL_PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';

const SESSION_COOKIE = 'alcarta_console';
/** Set by the sign-in page for its token form (login CSRF protection). */
const FORM_COOKIE = 'alcarta_console_sign_in';

/** Long enough for any wake-up on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 50;

/**
 * docs/approvers.md, the approver console without OpenID Connect: sign-in by token, the pending
 * list, a request page that shows an agent's draft sanitized in a sandboxed frame, decisions that
 * release the agent's wait, decisions made elsewhere, CSRF, sign-out and ended sessions,
 * accessibility (axe) and screenshots at desktop and phone widths. A real server, a real Chromium,
 * the official MCP SDK.
 */
describe('console pages', () => {
  let server: TestServer;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let imageHost: Server;
  let imagePort: number;
  let imageRequests = 0;
  let mailbox: string;
  let otherMailbox: string;
  let approver: { id: string; secret: string };
  let secondApprover: { id: string; secret: string };
  let readOnly: { id: string; secret: string };
  let agentToken: { id: string; secret: string };
  let agent: Client;
  let first: BrowserContext;
  let page: Page;
  let emailRequest: string;
  let approvalRequest: string;
  let otherRequest: string;

  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };
  const url = (path: string) => `${server.url}${path}`;

  /**
   * A fresh browser context signed in through the form with `secret`, once its pending list's live
   * stream is open (that request passes the session guard too: a test that changes the session
   * next must not race it).
   */
  const signedIn = async (secret: string, options: { bypassCSP?: boolean } = {}) => {
    const context = await browser!.newContext(options);
    const p = await context.newPage();
    await p.goto(url('/console'));
    assert.equal(new URL(p.url()).pathname, '/console/sign-in');
    await p.getByLabel('Token').fill(secret);
    const streamed = p.waitForResponse((r) => new URL(r.url()).pathname === '/console/events');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.waitForURL(url('/console'));
    assert.equal((await streamed).status(), 200);
    return { context, page: p };
  };
  /** The names of a context's cookies, sorted. */
  const cookieNames = async (context: BrowserContext) => (await context.cookies()).map((c) => c.name).sort();
  /** The session cookie of a context, as a Cookie header. */
  const cookieHeader = async (context: BrowserContext) =>
    (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');

  before(async () => {
    imagePort = await freePort();
    imageHost = createServer((_req, res) => {
      imageRequests++;
      res.writeHead(200, { 'content-type': 'image/png' });
      res.end();
    });
    await new Promise<void>((resolve) => imageHost.listen(imagePort, '127.0.0.1', resolve));
    server = await startTestServer();
    mailbox = await createMailbox(server.admin, `shop-${process.pid}@example.com`);
    otherMailbox = await createMailbox(server.admin);
    approver = await createToken(server.admin, {
      name: 'Approver',
      scopes: ['approvals:decide'],
      mailboxes: [mailbox, otherMailbox],
    });
    secondApprover = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailbox] });
    readOnly = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [mailbox] });
    agentToken = await createToken(server.admin, {
      name: 'Release bot',
      scopes: ['mail:send', 'approvals:read'],
      mailboxes: [mailbox, otherMailbox],
    });
    agent = await connectMcp(server.url, agentToken.secret);
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    await agent?.close();
    await browser?.close();
    await server?.close();
    await new Promise((resolve) => imageHost?.close(resolve));
  });

  browserIt('refuses a token without approvals:decide with the form again, then signs in with one', async () => {
    first = await browser!.newContext();
    page = await first.newPage();
    await page.goto(url('/console'));
    assert.equal(new URL(page.url()).pathname, '/console/sign-in');

    await page.getByLabel('Token').fill(readOnly.secret);
    const refused = page.waitForResponse((r) => r.url() === url('/console/sign-in') && r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Sign in' }).click();
    assert.equal((await refused).status(), 400);
    assert.match(await page.getByRole('alert').innerText(), /approvals:decide/);
    assert.deepEqual(await cookieNames(first), [FORM_COOKIE], 'no session cookie, only the sign-in form’s');

    await page.getByLabel('Token').fill('alc_not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    assert.match(await page.getByRole('alert').innerText(), /unknown, revoked or expired/);

    await page.getByLabel('Token').fill(approver.secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(url('/console'));
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Pending requests');
    assert.match(await page.locator('.empty').innerText(), /Nothing is waiting for your decision/);

    const cookie = (await first.cookies()).find((c) => c.name === SESSION_COOKIE)!;
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Lax');
    assert.equal(cookie.secure, false, 'plain-HTTP installation: no Secure flag');
    assert.ok(!cookie.value.includes(approver.secret) && cookie.value.length >= 43);
    const [row] = await server.db.query<{ credential_id: string; secret_hash: string; lifetime: number }>(
      `SELECT credential_id, secret_hash, extract(epoch FROM expires_at - created_at) AS lifetime FROM console_sessions`,
    );
    assert.equal(row.credential_id, approver.id);
    assert.notEqual(row.secret_hash, cookie.value, 'only the hash is stored');
    assert.ok(Math.abs(Number(row.lifetime) - 12 * 3600) < 60);
  });

  browserIt('lists what agents asked over MCP, newest first, filtered by mailbox', async () => {
    otherRequest = (await callOk(agent, 'request_approval', { mailbox_id: otherMailbox, title: 'Refund order 7781' }))
      .request_id;
    approvalRequest = (
      await callOk(agent, 'request_approval', {
        mailbox_id: mailbox,
        title: 'Ship release 4.2',
        details: 'Changelog:\n- faster waits',
      })
    ).request_id;
    emailRequest = (
      await callOk(agent, 'send_email', {
        mailbox_id: mailbox,
        to: ['customer@example.org'],
        cc: ['boss@example.org'],
        subject: 'Your refund',
        text: 'Hello, your refund is on its way.',
        html:
          '<p>Hello <b>there</b></p>' +
          '<script>document.body.setAttribute("data-ran", "yes")</script>' +
          `<img src="http://127.0.0.1:${imagePort}/pixel.png" alt="tracker">` +
          `<img src="${ONE_PIXEL_PNG}" alt="logo">` +
          '<a href="javascript:alert(1)" onclick="alert(2)">click</a>',
      })
    ).request_id;

    await page.goto(url('/console'));
    const links = page.locator('.requests li > a');
    assert.deepEqual(await links.allInnerTexts(), [
      'Send email "Your refund" to customer@example.org',
      'Ship release 4.2',
      'Refund order 7781',
    ]);
    assert.equal(await links.first().getAttribute('href'), `/console/requests/${emailRequest}`);
    // Each row names who asked: the token's name, with its id (names are not unique).
    for (const asked of await page.locator('.requests li .asked').allInnerTexts()) {
      assert.match(asked, new RegExp(`by Release bot ${agentToken.id}$`));
    }

    await page.getByLabel('Mailbox').selectOption(otherMailbox);
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(url(`/console?mailbox=${otherMailbox}`));
    assert.deepEqual(await page.locator('.requests li > a').allInnerTexts(), ['Refund order 7781']);

    const hidden = await createMailbox(server.admin);
    const notReached = await page.goto(url(`/console?mailbox=${hidden}`));
    assert.equal(notReached!.status(), 404, 'a mailbox the credential does not reach is not found');
  });

  browserIt('shows the draft with its HTML sanitized in a sandboxed frame, times in the browser', async () => {
    await page.goto(url('/console'));
    await page.getByRole('link', { name: 'Send email "Your refund" to customer@example.org' }).click();
    await page.waitForURL(url(`/console/requests/${emailRequest}`));
    const facts = await page.locator('dl.facts').first().innerText();
    assert.match(facts, new RegExp(`shop-${process.pid}@example.com`));
    assert.equal(await page.locator('dd.asked-by').innerText(), `Release bot ${agentToken.id}`);
    assert.equal(await page.locator('dd.asked-by .credential-id').innerText(), agentToken.id);
    const draft = await page.locator('section[aria-labelledby="draft-heading"]').innerText();
    for (const part of ['customer@example.org', 'boss@example.org', 'Your refund', 'your refund is on its way']) {
      assert.ok(draft.includes(part), `draft shows ${part}`);
    }
    const time = page.locator('time').first();
    assert.doesNotMatch(await time.innerText(), /UTC$/, 'console.js rewrote the time for the browser');

    const iframe = page.locator('iframe.draft-html');
    assert.equal(await iframe.getAttribute('sandbox'), '');
    const frame = page.frameLocator('iframe.draft-html');
    assert.equal(await frame.locator('p').innerText(), 'Hello there');
    assert.equal(await frame.locator('script').count(), 0);
    assert.equal(await frame.locator('body[data-ran]').count(), 0);
    assert.equal(await frame.locator('img').count(), 1);
    assert.equal(await frame.locator('img').getAttribute('src'), ONE_PIXEL_PNG);
    assert.equal(await frame.locator('[onclick], a[href^="javascript"]').count(), 0);
    assert.equal(imageRequests, 0, 'the remote image was never fetched');
  });

  browserIt('approving releases the agent’s monitor_approval; a second approver sees who decided', async () => {
    const second = await signedIn(secondApprover.secret);
    await second.page.goto(url(`/console/requests/${emailRequest}`));

    const waiting = callOk(agent, 'monitor_approval', { request_id: emailRequest, timeout_seconds: BLOCK });
    await waitFor('the agent’s parked wait', async () => (await activeWaits(server.url, 'request')) === 1);

    await page.getByLabel('Reason (optional)').fill('Refund confirmed by accounting.');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(url(`/console/requests/${emailRequest}?notice=decided`));
    assert.match(await page.getByRole('status').innerText(), /Your decision was recorded/);
    assert.equal(await page.locator('.decided-by').innerText(), `Approver ${approver.id}`);

    const result = await waiting;
    assert.equal(result.matched, true);
    assert.deepEqual(
      result.requests.map((r: { request_id: string; state: string }) => [r.request_id, r.state]),
      [[emailRequest, 'approved']],
    );
    const stored = await callOk(agent, 'get_request', { request_id: emailRequest });
    assert.equal(stored.decided_by, approver.id);
    assert.equal(stored.reason, 'Refund confirmed by accounting.');

    // The second approver's page is stale: their click finds the request decided, not an error.
    await second.page.getByRole('button', { name: 'Approve' }).click();
    await second.page.waitForURL(url(`/console/requests/${emailRequest}?notice=already_decided`));
    const notice = await second.page.getByRole('status').innerText();
    assert.match(notice, /already decided by someone else/);
    assert.match(notice, new RegExp(`: approved by Approver ${approver.id} at .+\\. Nothing was changed\\.$`));
    assert.doesNotMatch(notice, /UTC/, 'the time of the decision is in the browser’s time zone');
    assert.equal(await second.page.locator('.decided-by').innerText(), `Approver ${approver.id}`);
    assert.equal((await callOk(agent, 'get_request', { request_id: emailRequest })).decided_by, approver.id);
    await second.context.close();
  });

  browserIt('history lists decided requests, filtered by outcome and mailbox', async () => {
    await page.goto(url(`/console/requests/${otherRequest}`));
    await page.getByRole('button', { name: 'Reject' }).click();
    await page.waitForURL(url(`/console/requests/${otherRequest}?notice=decided`));

    await page.getByRole('link', { name: 'History' }).click();
    await page.waitForURL(url('/console/history'));
    const titles = () => page.locator('.requests li > a').allInnerTexts();
    // Newest decision first: the refund was asked for before the email but decided after it.
    assert.deepEqual(await titles(), ['Refund order 7781', 'Send email "Your refund" to customer@example.org']);
    const decided = await page.locator('.requests li .decided').allInnerTexts();
    assert.deepEqual(
      decided.map((d) => d.replace(/^decided .+ by /, '')),
      [`Approver ${approver.id}`, `Approver ${approver.id}`],
    );
    assert.deepEqual(await page.locator('.requests li .asked .credential-id').allInnerTexts(), [
      agentToken.id,
      agentToken.id,
    ]);
    await page.getByLabel('Outcome').selectOption('rejected');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/state=rejected/);
    assert.deepEqual(await titles(), ['Refund order 7781']);
    await page.getByLabel('Outcome').selectOption('');
    await page.getByLabel('Mailbox').selectOption(mailbox);
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(new RegExp(`mailbox=${mailbox}`));
    assert.deepEqual(await titles(), ['Send email "Your refund" to customer@example.org']);
    await page.getByLabel('Outcome').selectOption('cancelled');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/state=cancelled/);
    assert.match(await page.locator('.empty').innerText(), /No decided requests/);
    await page.getByLabel('Outcome').selectOption('');
    await page.getByLabel('Mailbox').selectOption(otherMailbox);
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(new RegExp(`mailbox=${otherMailbox}`));
    assert.deepEqual(await titles(), ['Refund order 7781']);

    // Pending is not an outcome, and a mailbox out of reach is not found: pages that say so.
    const notDecided = await page.goto(url('/console/history?state=pending'));
    assert.equal(notDecided!.status(), 400);
    assert.match(await page.locator('main').innerText(), /Choose one of: approved, rejected, expired, cancelled/);
    const hidden = await createMailbox(server.admin);
    assert.equal((await page.goto(url(`/console/history?mailbox=${hidden}`)))!.status(), 404);
  });

  browserIt('a POST without the session’s CSRF token is refused', async () => {
    const cookie = await cookieHeader(first);
    const post = (body: string) =>
      fetch(url(`/console/requests/${approvalRequest}/reject`), {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
    const missing = await post('reason=forged');
    assert.equal(missing.status, 403);
    assert.match(await missing.text(), /This form was refused/);
    assert.equal((await post('reason=forged&_csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).status, 403);
    assert.equal((await post('reason=forged&_csrf=short')).status, 403);
    assert.equal((await callOk(agent, 'get_request', { request_id: approvalRequest })).state, 'pending');

    await page.goto(url(`/console/requests/${approvalRequest}`));
    const token = await page.locator('input[name="_csrf"]').first().getAttribute('value');
    const shown = await page.locator('input[name="content_sha256"]').getAttribute('value');
    const accepted = await post(`reason=real&_csrf=${encodeURIComponent(token!)}&content_sha256=${shown}`);
    assert.equal(accepted.status, 303);
    assert.equal((await callOk(agent, 'get_request', { request_id: approvalRequest })).state, 'rejected');

    const signedOut = await fetch(url('/console'), { redirect: 'manual' });
    assert.equal(signedOut.status, 303);
    assert.equal(signedOut.headers.get('location'), '/console/sign-in');
  });

  browserIt('a sign-in form auto-submitted by another site is refused and signs nobody in (login CSRF)', async () => {
    const attacker = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [otherMailbox] });
    // A genuine form cookie and field, fetched by the attacker's own server from the sign-in page.
    const planted = await signInForm(server.url);
    // The attacker's site: another port of this host, which is the same site as the console (so
    // SameSite=Lax sends the console's cookies along) and may even write cookies for this host.
    const hostile = createServer((req, res) => {
      const plant = req.url === '/planted';
      res.writeHead(200, {
        'content-type': 'text/html',
        ...(plant && { 'set-cookie': `${planted.cookie}; Path=/console/sign-in; HttpOnly; SameSite=Lax` }),
      });
      res.end(
        `<form method="post" action="${url('/console/sign-in')}">` +
          `<input type="hidden" name="token" value="${attacker.secret}">` +
          (plant ? `<input type="hidden" name="_csrf" value="${planted.field}">` : '') +
          `</form><script>document.forms[0].submit()</script>`,
      );
    });
    const hostilePort = await freePort();
    await new Promise<void>((resolve) => hostile.listen(hostilePort, '127.0.0.1', resolve));
    const victim = await browser!.newContext();
    try {
      const p = await victim.newPage();
      // The victim opened the console's sign-in page before: the browser holds a genuine form cookie.
      await p.goto(url('/console/sign-in'));
      for (const path of ['/', '/planted']) {
        const posted = p.waitForResponse((r) => r.url() === url('/console/sign-in') && r.request().method() === 'POST');
        await p.goto(`http://127.0.0.1:${hostilePort}${path}`);
        assert.equal((await posted).status(), 403, path);
        await p.getByRole('heading', { level: 1, name: 'Sign-in refused' }).waitFor();
        assert.match(await p.locator('main').innerText(), /Start again from the sign-in page/);
        assert.equal(await p.getByRole('link', { name: 'Sign in again' }).getAttribute('href'), '/console/sign-in');
        assert.ok(!(await cookieNames(victim)).includes(SESSION_COOKIE), `${path}: no session cookie`);
      }
      // The planted pair was in place, and would pass as a double submit: the browser's
      // Sec-Fetch-Site (same-site, not same-origin) is what refused it.
      const formCookie = (await victim.cookies(url('/console/sign-in'))).find((c) => c.name === FORM_COOKIE);
      assert.equal(`${FORM_COOKIE}=${formCookie?.value}`, planted.cookie);
    } finally {
      await victim.close();
      await new Promise((resolve) => hostile.close(resolve));
    }

    // Plain HTTP clients send no Sec-Fetch-Site: the form token alone decides.
    const form = await signInForm(server.url);
    const other = await signInForm(server.url);
    const post = (cookie: string | undefined, field: string | undefined, site?: string) =>
      fetch(url('/console/sign-in'), {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...(cookie && { cookie }),
          ...(site && { 'sec-fetch-site': site }),
        },
        body: new URLSearchParams({ token: attacker.secret, ...(field !== undefined && { _csrf: field }) }),
      });
    for (const [what, cookie, field, site] of [
      ['neither cookie nor field', undefined, undefined],
      ['no cookie', undefined, form.field],
      ['no field', form.cookie, undefined],
      ['an empty field', form.cookie, ''],
      ['another form’s field', form.cookie, other.field],
      ['the pair from another site', form.cookie, form.field, 'cross-site'],
    ] as const) {
      const refused = await post(cookie, field, site);
      assert.equal(refused.status, 403, what);
      assert.match(await refused.text(), /Sign-in refused/, what);
      assert.deepEqual(refused.headers.getSetCookie(), [], `${what}: no cookie set`);
    }
    assert.deepEqual(
      await server.db.query(`SELECT 1 FROM console_sessions WHERE credential_id = $1`, [attacker.id]),
      [],
      'nobody was signed in as the attacker',
    );
    // The same pair, as the sign-in page's own form sends it, signs in.
    assert.equal((await post(form.cookie, form.field, 'same-origin')).status, 303);
  });

  browserIt('pages have no serious or critical axe violations; screenshots at 1280 and 375 px', async () => {
    const pending = (
      await callOk(agent, 'send_email', {
        mailbox_id: mailbox,
        to: ['partner@example.org'],
        subject: 'Quarterly figures',
        text: 'Dear partner,\n\nthe figures for Q4 are attached.\n\nRegards',
        html: `<p>Dear partner,</p><p>the figures for <b>Q4</b> are attached.</p><img src="${ONE_PIXEL_PNG}" alt="">`,
      })
    ).request_id as string;
    await callOk(agent, 'request_approval', {
      mailbox_id: otherMailbox,
      title: 'Delete the staging database',
      details: 'It has not been used since March.',
    });
    // The scan only: bypassCSP lets axe's source be added as a script; the pages themselves are unchanged.
    const scan = await browser!.newContext({ bypassCSP: true });
    await scan.addCookies((await first.cookies()).filter((c) => c.name === SESSION_COOKIE));
    const p = await scan.newPage();
    const pages = {
      'sign-in': '/console/sign-in',
      pending: '/console',
      request: `/console/requests/${pending}`,
      decided: `/console/requests/${emailRequest}`,
      history: '/console/history',
    };
    mkdirSync(SCREENSHOTS, { recursive: true });
    for (const [name, path] of Object.entries(pages)) {
      for (const width of [1280, 375]) {
        await p.setViewportSize({ width, height: 900 });
        await p.goto(url(path));
        const violations = await axeViolations(p);
        assert.deepEqual(violations, [], `${name} at ${width} px`);
        if (name === 'pending' || name === 'request') {
          if (name === 'request') await p.frameLocator('iframe.draft-html').locator('p').first().waitFor();
          // A viewport as tall as the page instead of fullPage: Chromium leaves the sandboxed frame
          // blank in a full-page capture when it starts below the viewport.
          const height = Number(await p.evaluate('document.documentElement.scrollHeight'));
          await p.setViewportSize({ width, height });
          await p.screenshot({ path: join(SCREENSHOTS, `console-${name}-${width}.png`) });
        }
      }
    }
    await scan.close();
  });

  browserIt('signing out ends the session on the server', async () => {
    const cookie = await cookieHeader(first);
    await page.goto(url('/console'));
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(url('/console/sign-in?signed_out=1'));
    assert.match(await page.getByRole('status').innerText(), /signed out/);
    assert.deepEqual(await cookieNames(first), [FORM_COOKIE], 'the session cookie is gone');
    const replay = await fetch(url('/console'), { redirect: 'manual', headers: { cookie } });
    assert.equal(replay.status, 303, 'the old cookie names no session any more');
    assert.deepEqual(
      await server.db.query(`SELECT 1 FROM console_sessions WHERE credential_id = $1`, [approver.id]),
      [],
    );
  });

  browserIt('an expired session and a revoked token each end with a clear page', async () => {
    const expiring = await signedIn(approver.secret);
    await server.db.query(
      `UPDATE console_sessions SET expires_at = now() - interval '1 second' WHERE credential_id = $1`,
      [approver.id],
    );
    const expired = await expiring.page.goto(url('/console'));
    assert.equal(expired!.status(), 401);
    assert.equal(await expiring.page.getByRole('heading', { level: 1 }).innerText(), 'Your session expired');
    await expiring.page.getByRole('link', { name: 'Sign in again' }).click();
    await expiring.page.waitForURL(url('/console/sign-in'));
    await expiring.context.close();

    const revoked = await signedIn(secondApprover.secret);
    assert.equal((await server.admin.delete(`/v1/tokens/${secondApprover.id}`)).status, 204);
    await revoked.page.goto(url('/console/history'));
    assert.equal(await revoked.page.getByRole('heading', { level: 1 }).innerText(), 'Your session ended');
    await revoked.context.close();
  });
});

describe('console sessions behind HTTPS', () => {
  let server: TestServer;

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_PUBLIC_URL: 'https://alcarta.example' } });
  });
  after(() => server?.close());

  it('sets the session cookie Secure, HttpOnly and SameSite=Lax, never beyond the token’s expiry', async () => {
    const mailbox = await createMailbox(server.admin);
    const expiresAt = new Date(Date.now() + 3600_000);
    const token = await createToken(server.admin, {
      scopes: ['approvals:decide'],
      mailboxes: [mailbox],
      expires_at: expiresAt.toISOString(),
    });
    const form = await signInForm(server.url);
    assert.match(
      form.setCookie,
      /^alcarta_console_sign_in=[\w-]{43}; Max-Age=1800; Path=\/console\/sign-in; Expires=[^;]+; HttpOnly; Secure; SameSite=Lax$/,
    );
    const res = await fetch(`${server.url}/console/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `_csrf=${form.field}&token=${encodeURIComponent(token.secret)}`,
    });
    assert.equal(res.status, 303);
    const cookie = res.headers.get('set-cookie') ?? '';
    assert.match(cookie, /^alcarta_console=[^;]+; Path=\/console; Expires=[^;]+; HttpOnly; Secure; SameSite=Lax$/);
    const [row] = await server.db.query<{ expires_at: Date }>(`SELECT expires_at FROM console_sessions`);
    assert.ok(Math.abs(row.expires_at.getTime() - expiresAt.getTime()) < 1000, 'the session ends with its token');
  });
});
