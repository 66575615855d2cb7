import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { simpleParser } from 'mailparser';
import { Browser, BrowserContext } from 'playwright-core';
import { freePort } from '#app/common/net.js';
import { launchChromium } from '../support/browser';
import { postSignIn } from '../support/console';
import { CONSOLE_CLIENT, IdentityProvider, startIdentityProvider } from '../support/identity-provider';
import { callOk, connectMcp } from '../support/mcp';
import { TestSmtpRelay } from '../support/smtp-relay';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

/**
 * Separation of duties end to end: a credential that holds `approvals:decide` and asked for a request
 * cannot decide it — a static token (by token id) and an OAuth principal (iss + sub) — over REST,
 * in the console (token sign-in with plain HTTP form posts carrying the CSRF token; OpenID Connect
 * sign-in in Chromium) and through approval links mailed to an address the requester reads (its
 * mailbox's own address, plus-tagged) or owns (the principal's email). Each refusal is 403
 * `self_approval` and changes nothing: the request stays pending, no event, the link stays unused.
 * Cancelling one's own request stays allowed; another credential still decides.
 */
describe('the credential that asked never decides', { skip: requireSystemPackage('python3-aiosmtpd') }, () => {
  let relay: TestSmtpRelay;
  let idp: IdentityProvider;
  let server: TestServer;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let mailboxId: string;
  const mailboxAddress = `desk-${process.pid}@example.com`;
  const taggedMailboxAddress = `desk-${process.pid}+approvals@example.com`;
  const outsider = 'carol@people.example';
  let asker: { id: string; secret: string };
  let askerAgent: Client;
  let alice: { token: string; agent: Client };

  const ask = async (agent: Client, title: string) =>
    (await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title })).request_id as string;
  /** The request as stored, and how many events it has: a refused decision must change neither. */
  const unchanged = async (requestId: string) => {
    const [row] = await server.db.query<{ state: string; decided_at: Date | null; decided_by: string | null }>(
      `SELECT state, decided_at, decided_by FROM approval_requests WHERE id = $1`,
      [requestId],
    );
    assert.deepEqual(row, { state: 'pending', decided_at: null, decided_by: null }, requestId);
    const events = await server.db.query<{ type: string }>(
      `SELECT type FROM events WHERE request_id = $1 ORDER BY id`,
      [requestId],
    );
    assert.deepEqual(
      events.map((e) => e.type),
      ['request_created', 'request_state_changed'],
      'only the events of its creation',
    );
  };
  const assertSelfApproval = (res: { status: number; body: any }) => {
    assert.equal(res.status, 403, JSON.stringify(res.body));
    assert.equal(res.body.error, 'forbidden');
    assert.equal(res.body.reason, 'self_approval');
    assert.equal(typeof res.body.message, 'string');
  };
  /** The link of the approval mail of `requestId` to `approver`, as a path on this server. */
  const linkTo = (requestId: string, approver: string) =>
    waitFor(
      `the approval mail of ${requestId} to ${approver}`,
      async () => {
        for (const received of await relay.received()) {
          if (!received.rcptTos.includes(approver)) continue;
          const text = (await simpleParser(received.raw)).text ?? '';
          if (!text.includes(requestId)) continue;
          return new URL(/https?:\/\/\S+\/console\/links\/[A-Za-z0-9_-]+/.exec(text)![0]).pathname;
        }
        return undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
  const linkPage = async (path: string, form?: Record<string, string>) => {
    const res = await fetch(server.url + path, {
      method: form ? 'POST' : 'GET',
      ...(form && {
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form).toString(),
      }),
    });
    return { status: res.status, html: await res.text() };
  };
  const usedLinks = async (requestId: string) =>
    Number(
      (
        await server.db.query<{ count: string }>(
          `SELECT count(*) FROM approval_links WHERE request_id = $1 AND used_at IS NOT NULL`,
          [requestId],
        )
      )[0].count,
    );

  before(async () => {
    const appUrl = `http://127.0.0.1:${await freePort()}`;
    relay = await TestSmtpRelay.start();
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
        ALCARTA_SMTP_RELAY_URL: relay.url,
      },
    });
    mailboxId = await createMailbox(server.admin, mailboxAddress);
    const granted = await server.admin.post('/v1/grants', { principal: 'group:ops', mailboxes: [mailboxId] });
    assert.equal(granted.status, 201, JSON.stringify(granted.body));
    const approvers = await server.admin.request('PUT', `/v1/mailboxes/${mailboxId}/approvers`, {
      emails: [taggedMailboxAddress, 'alice@example.com', outsider],
    });
    assert.equal(approvers.status, 200, JSON.stringify(approvers.body));
    asker = await createToken(server.admin, {
      name: 'Agent that may decide',
      scopes: ['approvals:read', 'approvals:decide', 'mail:send'],
      mailboxes: [mailboxId],
    });
    askerAgent = await connectMcp(server.url, asker.secret);
    // A person's token from the provider: approvals:decide, and the ops group's mailbox.
    const aliceToken = await idp.personToken('alice');
    alice = { token: aliceToken, agent: await connectMcp(server.url, aliceToken) };
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    await askerAgent?.close();
    await alice?.agent.close();
    await browser?.close();
    await server?.close();
    await idp?.close();
    await relay?.stop();
  });

  it('REST: a static token and an OAuth principal get 403 self_approval for their own requests; another credential decides', async () => {
    const byToken = await ask(askerAgent, 'Pay invoice 42');
    const byPrincipal = await ask(alice.agent, 'Refund order 7781');
    const asToken = server.admin.withToken(asker.secret);
    const asAlice = server.admin.withToken(alice.token);
    for (const [client, requestId] of [
      [asToken, byToken],
      [asAlice, byPrincipal],
    ] as const) {
      assertSelfApproval(await client.post(`/v1/requests/${requestId}/approve`, {}));
      assertSelfApproval(await client.post(`/v1/requests/${requestId}/reject`, { reason: 'mine' }));
      await unchanged(requestId);
    }
    // Each decides what the other asked for.
    const approved = await asAlice.post(`/v1/requests/${byToken}/approve`, {});
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assert.equal(approved.body.decided_by, 'alice@example.com');
    const rejected = await asToken.post(`/v1/requests/${byPrincipal}/reject`, {});
    assert.equal(rejected.status, 200, JSON.stringify(rejected.body));
  });

  it('an email the token asked to send is not sent by its own approval: no message, no delivery', async () => {
    const { request_id: requestId } = await callOk(askerAgent, 'send_email', {
      mailbox_id: mailboxId,
      to: ['customer@example.org'],
      subject: 'Your refund',
      text: 'Approved by me.',
    });
    assertSelfApproval(await server.admin.withToken(asker.secret).post(`/v1/requests/${requestId}/approve`, {}));
    await unchanged(requestId);
    assert.deepEqual(await server.db.query(`SELECT 1 FROM messages WHERE subject = 'Your refund'`), []);
    assert.deepEqual(await server.db.query(`SELECT 1 FROM outbound_deliveries WHERE request_id = $1`, [requestId]), []);
  });

  it('withdrawing is not deciding: the credential that asked may cancel its request', async () => {
    const requestId = await ask(askerAgent, 'Changed my mind');
    const cancelled = await callOk(askerAgent, 'cancel_request', { request_id: requestId });
    assert.equal(cancelled.state, 'cancelled');
  });

  it('console, token sign-in: the request page offers no decision, and a form post with the CSRF token is refused', async () => {
    const requestId = await ask(askerAgent, 'Ship release 4.2');
    const signedIn = await postSignIn(server.url, asker.secret);
    assert.equal(signedIn.status, 303);
    const cookie = signedIn.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .find((c) => c.startsWith('alcarta_console='));
    assert.ok(cookie, 'a session cookie');
    const page = await fetch(`${server.url}/console/requests/${requestId}`, { headers: { cookie } });
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /You cannot decide this request: it was asked for by the credential you signed in with/);
    assert.doesNotMatch(html, /\/approve"|class="approve"/);
    // The sign-out form carries the session's CSRF token.
    const csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
    assert.ok(csrf, 'a CSRF token on the page');
    for (const action of ['approve', 'reject']) {
      const refused = await fetch(`${server.url}/console/requests/${requestId}/${action}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, reason: 'mine' }).toString(),
      });
      assert.equal(refused.status, 403, action);
      assert.match(await refused.text(), /cannot approve or reject it/);
    }
    await unchanged(requestId);
  });

  it('console, OpenID Connect sign-in in Chromium: the principal that asked sees a notice, not buttons, and its post is refused', async (t) => {
    if (skipReason) return t.skip(skipReason);
    const requestId = await ask(alice.agent, 'Open the firewall');
    const context: BrowserContext = await browser!.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${server.url}/console`);
      await page.getByRole('link', { name: `Sign in with ${new URL(idp.issuer).host}` }).click();
      await page.getByLabel('Account').fill('alice');
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.waitForURL(`${server.url}/console`);
      await page.getByRole('link', { name: 'Open the firewall' }).click();
      await page.waitForURL(`${server.url}/console/requests/${requestId}`);
      assert.match(await page.getByRole('status').innerText(), /You cannot decide this request/);
      assert.equal(await page.getByRole('button', { name: 'Approve' }).count(), 0);
      assert.equal(await page.getByRole('button', { name: 'Reject' }).count(), 0);
      // The form the page did not offer, posted with the session's cookie and CSRF token.
      const csrf = await page.locator('input[name="_csrf"]').first().getAttribute('value');
      const refused = await context.request.post(`${server.url}/console/requests/${requestId}/approve`, {
        form: { _csrf: csrf!, reason: '' },
        maxRedirects: 0,
      });
      assert.equal(refused.status(), 403);
      assert.match(await refused.text(), /cannot approve or reject it/);
    } finally {
      await context.close();
    }
    await unchanged(requestId);
  });

  it("approval links to the requester's own mailbox (plus-tagged) or to the principal's own email cannot decide; another approver's link can", async () => {
    const byToken = await ask(askerAgent, 'Wire 10 000 EUR');
    const byPrincipal = await ask(alice.agent, 'Delete the backups');
    const refusedLinks = [
      [byToken, await linkTo(byToken, taggedMailboxAddress)],
      [byPrincipal, await linkTo(byPrincipal, 'alice@example.com')],
    ] as const;
    for (const [requestId, link] of refusedLinks) {
      const shown = await linkPage(link);
      assert.equal(shown.status, 403, shown.html);
      assert.match(shown.html, /You cannot decide this request/);
      assert.doesNotMatch(shown.html, /name="decision"/);
      const posted = await linkPage(link, { decision: 'approved' });
      assert.equal(posted.status, 403, posted.html);
      assert.match(posted.html, /Nothing was decided/);
      await unchanged(requestId);
      assert.equal(await usedLinks(requestId), 0, 'the links stay unused');
    }
    const outsiderLink = await linkTo(byToken, outsider);
    const outsiderPage = (await linkPage(outsiderLink)).html;
    assert.match(outsiderPage, /name="decision" value="approved"/);
    const shownContent = /name="content_sha256" value="([0-9a-f]{64})"/.exec(outsiderPage)![1];
    const decided = await linkPage(outsiderLink, { decision: 'approved', content_sha256: shownContent });
    assert.equal(decided.status, 200, decided.html);
    assert.equal((await callOk(askerAgent, 'get_request', { request_id: byToken })).decided_by, outsider);
  });
});
