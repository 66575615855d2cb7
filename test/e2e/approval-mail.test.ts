import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { simpleParser } from 'mailparser';
import { Browser } from 'playwright-core';
import { axeViolations, launchChromium } from '../support/browser';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits, metricValue } from '../support/metrics';
import { TestSmtpRelay } from '../support/smtp-relay';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

/** Long enough for any wake-up on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 50;
const SCREENSHOTS = join(process.cwd(), 'test-output', 'screenshots');
/** The narrowest screen a link page must fit (a phone), in CSS pixels. */
const PHONE_WIDTH = 375;

interface ApprovalMail {
  to: string[];
  subject: string;
  text: string;
  link: string;
}

/**
 * "Approval by email" (docs/approvers.md) end to end: an admin sets a mailbox's approvers over
 * REST, an agent asks over MCP and parks on monitor_approval, each approver gets a mail through a
 * real SMTP server (Debian's aiosmtpd as the relay), opening the link decides nothing, the page's
 * POST decides as the approver and wakes the agent; spent, expired, unknown and overtaken links are
 * refused with plain pages; approvers of other mailboxes get nothing; the PUT validates. The link
 * pages in Chromium (axe, keyboard, a phone's width), the attempts metric, and the housekeeping
 * that deletes old mails, spent links and long-expired console sessions.
 */
describe('approval by email', { skip: requireSystemPackage('python3-aiosmtpd') }, () => {
  let relay: TestSmtpRelay;
  let server: TestServer;
  let agent: Client;
  let agentTokenId: string;
  let mailboxId: string;
  const mailboxAddress = `releases-${process.pid}@example.com`;
  let otherMailboxId: string;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  const approvers = ['alice@approvers.example', 'bob@approvers.example'];
  const otherApprover = 'carol@elsewhere.example';

  /** The approval mails received so far for `requestId`, parsed, with the link they carry. */
  const mailsFor = async (requestId: string): Promise<ApprovalMail[]> => {
    const mails: ApprovalMail[] = [];
    for (const received of await relay.received()) {
      const parsed = await simpleParser(received.raw);
      const text = parsed.text ?? '';
      if (!text.includes(requestId)) continue;
      const link = /https?:\/\/\S+\/console\/links\/[A-Za-z0-9_-]+/.exec(text)?.[0];
      assert.ok(link, text);
      mails.push({ to: received.rcptTos, subject: parsed.subject ?? '', text, link });
    }
    return mails;
  };
  const mailsOfAllApprovers = (requestId: string, count = approvers.length) =>
    waitFor(
      `the approval mails of ${requestId}`,
      async () => {
        const mails = await mailsFor(requestId);
        return mails.length >= count ? mails : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
  const linkOf = (mails: ApprovalMail[], approver: string) => {
    const mail = mails.find((m) => m.to.includes(approver));
    assert.ok(mail, `a mail to ${approver}`);
    // The link's path on this server (ALCARTA_PUBLIC_URL is this server).
    return new URL(mail.link).pathname;
  };
  /**
   * GET `path`, or POST `form` to it as the page's own form does: with the `content_sha256` the page
   * shows, unless the form says otherwise (a page of a used or unknown link shows none).
   */
  const page = async (path: string, form?: Record<string, string>) => {
    if (form && !('content_sha256' in form)) {
      const shown = /name="content_sha256" value="([0-9a-f]{64})"/.exec((await page(path)).html)?.[1];
      if (shown) form = { ...form, content_sha256: shown };
    }
    const res = await fetch(server.url + path, {
      method: form ? 'POST' : 'GET',
      redirect: 'manual',
      ...(form && {
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form).toString(),
      }),
    });
    return { status: res.status, headers: res.headers, html: await res.text() };
  };
  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };
  /** The page's serious and critical axe violations (the context must bypass CSP to add axe). */
  const sentAttempts = () => metricValue(server.url, 'alcarta_approval_mail_attempts_total', { outcome: 'sent' });
  const requestState = (requestId: string) => callOk(agent, 'get_request', { request_id: requestId });
  const newRequest = async (targetMailbox = mailboxId, extra: Record<string, unknown> = {}) =>
    (await callOk(agent, 'request_approval', { mailbox_id: targetMailbox, title: 'Ship release 4.2', ...extra }))
      .request_id as string;

  before(async () => {
    relay = await TestSmtpRelay.start();
    server = await startTestServer({
      ownPublicUrl: true,
      env: {
        ALCARTA_SMTP_RELAY_URL: relay.url,
        ALCARTA_SMTP_RETRY_BASE_SECONDS: '1',
        ALCARTA_EXPIRY_SWEEP_SECONDS: '1',
        ALCARTA_HOUSEKEEPING_SECONDS: '1',
      },
    });
    mailboxId = await createMailbox(server.admin, mailboxAddress);
    otherMailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, {
      name: 'Release bot',
      scopes: ['approvals:read', 'mail:read'],
      mailboxes: [mailboxId, otherMailboxId],
    });
    agentTokenId = token.id;
    agent = await connectMcp(server.url, token.secret);
    const set = await server.admin.request('PUT', `/v1/mailboxes/${mailboxId}/approvers`, { emails: approvers });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    const setOther = await server.admin.request('PUT', `/v1/mailboxes/${otherMailboxId}/approvers`, {
      emails: [otherApprover],
    });
    assert.equal(setOther.status, 200, JSON.stringify(setOther.body));
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    await agent?.close();
    await browser?.close();
    await server?.close();
    await relay?.stop();
  });

  it('PUT replaces the approvers and GET answers them', async () => {
    const mailbox = await createMailbox(server.admin);
    const path = `/v1/mailboxes/${mailbox}/approvers`;
    assert.deepEqual((await server.admin.get(path)).body, { mailbox_id: mailbox, emails: [] });
    const first = await server.admin.request('PUT', path, {
      emails: ['B@Example.org', 'a@example.org', 'b@example.org'],
    });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(first.body, { mailbox_id: mailbox, emails: ['a@example.org', 'b@example.org'] });
    const replaced = await server.admin.request('PUT', path, { emails: ['c@example.org'] });
    assert.deepEqual(replaced.body, { mailbox_id: mailbox, emails: ['c@example.org'] });
    assert.deepEqual((await server.admin.get(path)).body, { mailbox_id: mailbox, emails: ['c@example.org'] });
    const cleared = await server.admin.request('PUT', path, { emails: [] });
    assert.deepEqual(cleared.body, { mailbox_id: mailbox, emails: [] });
  });

  it('PUT refuses what is not a list of addresses, and mailboxes out of reach', async () => {
    const path = `/v1/mailboxes/${mailboxId}/approvers`;
    for (const body of [
      {},
      { emails: 'a@example.org' },
      { emails: ['not an address'] },
      { emails: [42] },
      { emails: Array.from({ length: 21 }, (_, i) => `p${i}@example.org`) },
    ]) {
      const res = await server.admin.request('PUT', path, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error, 'invalid_request');
    }
    assert.deepEqual((await server.admin.get(path)).body.emails, approvers, 'a refused PUT changes nothing');

    const unknown = await server.admin.request('PUT', '/v1/mailboxes/mbx_doesNotExist/approvers', { emails: [] });
    assert.equal(unknown.status, 404);
    // A mailbox-bound admin reaches its own mailbox only; others answer as unknown
    // (docs/operators.md "Limits and hardening").
    const bound = await createToken(server.admin, { scopes: ['admin'], mailboxes: [otherMailboxId] });
    const boundAdmin = server.admin.withToken(bound.secret);
    assert.equal((await boundAdmin.get(`/v1/mailboxes/${otherMailboxId}/approvers`)).status, 200);
    const outOfReach = await boundAdmin.request('PUT', path, { emails: ['mallory@example.org'] });
    assert.equal(outOfReach.status, 404, JSON.stringify(outOfReach.body));
    assert.equal((await boundAdmin.get(path)).status, 404);
    const notAdmin = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: ['*'] });
    assert.equal((await server.admin.withToken(notAdmin.secret).get(path)).status, 403);
  });

  it('mails every approver; GET decides nothing; the POST decides as the approver and wakes the agent', async () => {
    const sentBefore = await sentAttempts();
    const requestId = await newRequest(mailboxId, { details: 'Tagged v4.2.0; changelog reviewed.' });
    const waiting = callOk(agent, 'monitor_approval', { request_id: requestId, timeout_seconds: BLOCK });
    await waitFor('the parked monitor_approval', async () => (await activeWaits(server.url, 'request')) === 1);

    const mails = await mailsOfAllApprovers(requestId);
    // Counted once the outcome is recorded, just after the relay took the mail.
    await waitFor('both sent attempts counted', async () => (await sentAttempts()) >= sentBefore + approvers.length);
    assert.deepEqual(
      mails.map((m) => m.to).sort(),
      approvers.map((a) => [a]),
    );
    for (const mail of mails) {
      assert.match(mail.subject, /Ship release 4\.2/);
      assert.match(mail.text, /Tagged v4\.2\.0/);
      assert.match(mail.text, new RegExp(`^Asked by: Release bot \\(${agentTokenId}\\)$`, 'm'));
      assert.ok(mail.link.startsWith(`${server.url}/console/links/`), mail.link);
    }
    const alice = linkOf(mails, approvers[0]);
    const bob = linkOf(mails, approvers[1]);
    assert.notEqual(alice, bob, 'each approver has a link of its own');

    // Opening the link (as a mail scanner would) shows the confirmation page and decides nothing.
    const shown = await page(alice);
    assert.equal(shown.status, 200);
    assert.match(shown.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.match(shown.html, /Ship release 4\.2/);
    // The approver recognises the request: the mailbox's address and who asked, not bare ids.
    assert.match(shown.html, new RegExp(`by an agent of mailbox ${mailboxAddress.replace(/[.]/g, '\\.')}\\.`));
    assert.match(shown.html, new RegExp(`<dt>Asked by</dt><dd>Release bot \\(${agentTokenId}\\)</dd>`));
    assert.match(shown.html, /<form method="post"/);
    assert.match(shown.html, /name="reason"/);
    assert.doesNotMatch(shown.html, /<script>|<script [^>]*>[^<]/, 'no inline script');
    assert.equal((await page(alice)).status, 200, 'opening it twice still decides nothing');
    assert.equal((await requestState(requestId)).state, 'pending');

    const decided = await page(alice, { decision: 'approved', reason: 'Looks good' });
    assert.equal(decided.status, 200, decided.html);
    assert.match(decided.html, /approved/);

    const woken = await waiting;
    assert.equal(woken.matched, true);
    assert.deepEqual(woken.requests, [{ request_id: requestId, state: 'approved' }]);
    const stored = await callOk(agent, 'get_request', { request_id: requestId });
    assert.equal(stored.decided_by, approvers[0]);
    assert.equal(stored.reason, 'Looks good');

    // The same link again, and the other approver's link: refused plainly, nothing changes.
    for (const [path, form] of [
      [alice, { decision: 'rejected' }],
      [alice, undefined],
      [bob, { decision: 'rejected' }],
      [bob, undefined],
    ] as const) {
      const refused = await page(path, form);
      assert.equal(refused.status, 410, refused.html);
      assert.match(refused.html, /already used/);
      assert.match(refused.html, /approved by alice@approvers\.example/);
      assert.doesNotMatch(refused.html, /at .*\(.*:\d+:\d+\)/, 'no stack');
    }
    assert.equal((await requestState(requestId)).state, 'approved');

    // Only this mailbox's approvers were asked.
    const asked = await server.db.query<{ email: string }>(
      'SELECT email FROM approval_mails WHERE request_id = $1 ORDER BY email',
      [requestId],
    );
    assert.deepEqual(
      asked.map((r) => r.email),
      approvers,
    );
    assert.equal((await relay.received()).filter((m) => m.rcptTos.includes(otherApprover)).length, 0);
  });

  browserIt('in Chromium: confirm with the keyboard, the decided and used pages; axe and a phone’s width', async () => {
    const requestId = await newRequest(mailboxId, { details: 'Tagged v4.3.0.' });
    const waiting = callOk(agent, 'monitor_approval', { request_id: requestId, timeout_seconds: BLOCK });
    await waitFor('the parked monitor_approval', async () => (await activeWaits(server.url, 'request')) === 1);
    const link = server.url + linkOf(await mailsOfAllApprovers(requestId), approvers[1]);

    // The scan only: bypassCSP lets axe's source be added as a script; the pages themselves are unchanged.
    const context = await browser!.newContext({ bypassCSP: true, viewport: { width: PHONE_WIDTH, height: 800 } });
    try {
      const p = await context.newPage();
      mkdirSync(SCREENSHOTS, { recursive: true });
      const check = async (name: string) => {
        assert.deepEqual(await axeViolations(p), [], `axe on the ${name} page`);
        const width = Number(await p.evaluate('document.documentElement.scrollWidth'));
        assert.ok(width <= PHONE_WIDTH, `the ${name} page is ${width} px wide at ${PHONE_WIDTH} px`);
        await p.screenshot({ path: join(SCREENSHOTS, `approval-link-${name}-${PHONE_WIDTH}.png`), fullPage: true });
      };

      const shown = await p.goto(link);
      assert.equal(shown!.status(), 200);
      assert.equal(await p.getByRole('heading', { level: 1 }).innerText(), 'Decide a request');
      await check('confirm');
      assert.equal((await requestState(requestId)).state, 'pending', 'opening the link decides nothing');

      await p.getByLabel('Reason (optional)').fill('Checked on my phone');
      await p.getByRole('button', { name: 'Approve' }).focus();
      const posted = p.waitForResponse((r) => r.url() === link && r.request().method() === 'POST');
      await p.keyboard.press('Enter');
      assert.equal((await posted).status(), 200);
      await p.getByRole('heading', { name: 'Request approved' }).waitFor();
      await check('decided');

      const woken = await waiting;
      assert.deepEqual(woken.requests, [{ request_id: requestId, state: 'approved' }]);
      const stored = await requestState(requestId);
      assert.equal(stored.decided_by, approvers[1]);
      assert.equal(stored.reason, 'Checked on my phone');

      const again = await p.goto(link);
      assert.equal(again!.status(), 410);
      assert.equal(await p.getByRole('heading', { level: 1 }).innerText(), 'Link already used');
      await check('used');
    } finally {
      await context.close();
    }
  });

  it('a link of a request decided elsewhere, an unknown link and a bad form are refused plainly', async () => {
    const requestId = await newRequest();
    const mails = await mailsOfAllApprovers(requestId);
    const rejected = await server.admin.post(`/v1/requests/${requestId}/reject`, { reason: 'not now' });
    assert.equal(rejected.status, 200, JSON.stringify(rejected.body));
    const overtaken = await page(linkOf(mails, approvers[1]));
    assert.equal(overtaken.status, 409, overtaken.html);
    assert.match(overtaken.html, /decided elsewhere/);
    const overtakenPost = await page(linkOf(mails, approvers[1]), { decision: 'approved' });
    assert.equal(overtakenPost.status, 409, overtakenPost.html);
    assert.equal((await requestState(requestId)).state, 'rejected');

    const unknown = await page('/console/links/thisTokenWasNeverIssued');
    assert.equal(unknown.status, 404);
    assert.match(unknown.html, /Unknown link/);
    assert.equal((await page('/console/links/thisTokenWasNeverIssued', { decision: 'approved' })).status, 404);

    const pending = await newRequest();
    const link = linkOf(await mailsOfAllApprovers(pending), approvers[0]);
    assert.equal((await page(link, { decision: 'maybe' })).status, 400);
    assert.equal((await page(link, {})).status, 400);
    assert.equal((await requestState(pending)).state, 'pending', 'a bad form decides nothing');
  });

  it('the link of an expired request is refused', async () => {
    const requestId = await newRequest(mailboxId, { expires_in_seconds: 5 });
    const link = linkOf(await mailsOfAllApprovers(requestId), approvers[0]);
    await waitFor('the request to expire', async () => (await requestState(requestId)).state === 'expired', {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    const shown = await page(link);
    assert.equal(shown.status, 410, shown.html);
    assert.match(shown.html, /expired/);
    const posted = await page(link, { decision: 'approved' });
    assert.equal(posted.status, 410, posted.html);
    assert.equal((await requestState(requestId)).state, 'expired');
  });

  it('a mailbox without approvers mails nobody', async () => {
    const lonely = await createMailbox(server.admin);
    const token = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [lonely] });
    const lonelyAgent = await connectMcp(server.url, token.secret);
    try {
      const { request_id: requestId } = await callOk(lonelyAgent, 'request_approval', {
        mailbox_id: lonely,
        title: 'Nobody to ask',
      });
      const rows = await server.db.query('SELECT id FROM approval_mails WHERE request_id = $1', [requestId]);
      assert.equal(rows.length, 0);
    } finally {
      await lonelyAgent.close();
    }
  });

  it('housekeeping deletes finished mails and spent links after 7 days, sessions a lifetime after expiry', async () => {
    const decided = async () => {
      const requestId = await newRequest();
      await mailsOfAllApprovers(requestId);
      assert.equal((await server.admin.post(`/v1/requests/${requestId}/reject`, {})).status, 200);
      return requestId;
    };
    const old = await decided();
    const fresh = await decided();
    const pending = await newRequest();
    await mailsOfAllApprovers(pending);
    const requests = [old, fresh, pending];
    await waitFor('every mail sent and recorded', async () => {
      const rows = await server.db.query<{ status: string }>(
        'SELECT status FROM approval_mails WHERE request_id = ANY($1)',
        [requests],
      );
      return rows.length === 6 && rows.every((r) => r.status === 'sent');
    });
    const [alice, bob] = approvers;
    // Back-dated: the old request's mails; one of its links used, the other expired, 8 days ago; the
    // pending request's links expired as long ago (they stay while it waits).
    await server.db.query(`UPDATE approval_mails SET updated_at = now() - interval '8 days' WHERE request_id = $1`, [
      old,
    ]);
    await server.db.query(
      `UPDATE approval_links SET used_at = now() - interval '8 days' WHERE request_id = $1 AND email = $2`,
      [old, alice],
    );
    await server.db.query(
      `UPDATE approval_links SET expires_at = now() - interval '8 days' WHERE request_id = ANY($1) AND email = $2`,
      [[old, pending], bob],
    );
    await server.db.query(
      `INSERT INTO console_sessions (secret_hash, credential_id, expires_at) VALUES
         (repeat('a', 64), 'tok_housekeepingOld', now() - interval '13 hours'),
         (repeat('b', 64), 'tok_housekeepingRecent', now() - interval '1 hour')`,
    );

    const count = async (table: string, requestId: string) =>
      (
        await server.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE request_id = $1`, [
          requestId,
        ])
      )[0].n;
    const sessions = async () =>
      (
        await server.db.query<{ credential_id: string }>(
          `SELECT credential_id FROM console_sessions WHERE credential_id LIKE 'tok_housekeeping%'`,
        )
      ).map((r) => r.credential_id);
    await waitFor(
      'the old rows deleted',
      async () =>
        (await count('approval_mails', old)) === 0 &&
        (await count('approval_links', old)) === 0 &&
        !(await sessions()).includes('tok_housekeepingOld'),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    assert.equal(await count('approval_mails', fresh), 2, 'fresh mails stay');
    assert.equal(await count('approval_links', fresh), 2, 'fresh links stay');
    assert.equal(await count('approval_mails', pending), 2);
    assert.equal(await count('approval_links', pending), 2, 'the links of a pending request stay');
    assert.deepEqual(await sessions(), ['tok_housekeepingRecent'], 'a session expired within a lifetime stays');
    assert.equal((await requestState(old)).state, 'rejected', 'the request itself stays');
  });
});
