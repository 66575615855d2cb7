import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { simpleParser } from 'mailparser';
import { Browser, BrowserContext, Page } from 'playwright-core';
import { contentOfRequest, contentSha256 } from '#app/approvals/request-content.js';
import { launchChromium } from '../support/browser';
import { callOk, connectMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { TestSmtpRelay } from '../support/smtp-relay';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

/** What an agent might put in a draft: a tracking pixel, a script, a relative image, a handler. */
const HOSTILE_HTML =
  '<p onclick="steal()">Hello <b>there</b></p><img src="https://tracker.example.net/pixel.gif">' +
  '<script>alert(1)</script><img src="relative.gif">';
const REMOVED = {
  scripts: 1,
  event_handlers: 1,
  remote_resources: 1,
  relative_resources: 1,
  styles: 0,
  forms: 0,
  other_elements: 0,
};

/**
 * What is approved is what leaves, end to end: send_email sanitizes the draft when the request is made
 * and says what it removed; the console and the approval link show the sanitized draft with that
 * notice and load nothing; the relay (Debian's aiosmtpd) receives exactly the approved draft; a
 * decision of content other than what the person saw is refused (409 content_changed) on REST, in the
 * console (Chromium) and on the link page, and changes nothing; and the outbox refuses to send a
 * message that no longer matches the approved content (delivery failed, reason content_changed).
 */
describe('approved content', { skip: requireSystemPackage('python3-aiosmtpd') }, () => {
  let relay: TestSmtpRelay;
  let server: TestServer;
  let agent: Client;
  let approver: RestClient;
  let approverSecret: string;
  let mailboxId: string;
  let linkMailboxId: string;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let context: BrowserContext;
  let page: Page;
  /** Every URL the browser asked for, in order. */
  const fetched: string[] = [];

  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };
  const sendEmail = (subject: string, extra: Record<string, unknown> = {}, from = mailboxId) =>
    callOk(agent, 'send_email', {
      mailbox_id: from,
      to: ['customer@example.org'],
      subject,
      text: 'Plain text.',
      html: HOSTILE_HTML,
      ...extra,
    });
  const stateOf = async (requestId: string) => (await callOk(agent, 'get_request', { request_id: requestId })).state;
  /** The mails the relay received with this subject. */
  const receivedWithSubject = async (subject: string) => {
    const mails = [];
    for (const received of await relay.received()) {
      const parsed = await simpleParser(received.raw);
      if (parsed.subject === subject) mails.push(parsed);
    }
    return mails;
  };
  /**
   * Changes a pending request's text in the database the way an edit would (content and hash
   * together), so a page opened before shows content that is no longer the request's.
   */
  const editText = async (requestId: string, text: string) => {
    const [row] = await server.db.query<{ kind: 'send_email'; mailbox_id: string; email: any; title: string }>(
      `SELECT kind, mailbox_id, email, title FROM approval_requests WHERE id = $1`,
      [requestId],
    );
    const email = { ...row.email, text };
    const hash = contentSha256(
      contentOfRequest({ kind: row.kind, mailboxId: row.mailbox_id, email, title: row.title, details: null }),
    );
    await server.db.query(`UPDATE approval_requests SET email = $2, content_sha256 = $3 WHERE id = $1`, [
      requestId,
      JSON.stringify(email),
      hash,
    ]);
  };

  before(async () => {
    relay = await TestSmtpRelay.start();
    server = await startTestServer({
      ownPublicUrl: true,
      env: { ALCARTA_SMTP_RELAY_URL: relay.url, ALCARTA_SMTP_RETRY_BASE_SECONDS: '1' },
    });
    mailboxId = await createMailbox(server.admin, `sales-${process.pid}@example.com`);
    linkMailboxId = await createMailbox(server.admin, `billing-${process.pid}@example.com`);
    const agentToken = await createToken(server.admin, {
      name: 'Sales bot',
      scopes: ['mail:send', 'mail:read', 'approvals:read'],
      mailboxes: [mailboxId, linkMailboxId],
    });
    agent = await connectMcp(server.url, agentToken.secret);
    const approverToken = await createToken(server.admin, {
      name: 'Approver',
      scopes: ['approvals:decide'],
      mailboxes: [mailboxId],
    });
    approverSecret = approverToken.secret;
    approver = server.admin.withToken(approverSecret);
    const set = await server.admin.request('PUT', `/v1/mailboxes/${linkMailboxId}/approvers`, {
      emails: ['dana@approvers.example'],
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else {
      browser = launched.browser;
      context = await browser.newContext();
      context.on('request', (r) => fetched.push(r.url()));
      page = await context.newPage();
    }
  });

  after(async () => {
    await agent?.close();
    await browser?.close();
    await server?.close();
    await relay?.stop();
  });

  it('send_email stores the sanitized draft and says what it removed', async () => {
    const created = await sendEmail('Sanitized at request time');
    assert.deepEqual(created.sanitized, REMOVED);
    const request = await callOk(agent, 'get_request', { request_id: created.request_id });
    assert.equal(request.email.html, '<p>Hello <b>there</b></p>');
    assert.deepEqual(request.sanitized, REMOVED);
    assert.match(request.content_sha256, /^[0-9a-f]{64}$/);

    const clean = await sendEmail('Nothing to remove', { html: '<p>Fine</p>' });
    assert.deepEqual(clean.sanitized, {
      ...REMOVED,
      scripts: 0,
      event_handlers: 0,
      remote_resources: 0,
      relative_resources: 0,
    });
    const textOnly = await callOk(agent, 'send_email', {
      mailbox_id: mailboxId,
      to: ['customer@example.org'],
      subject: 'Text only',
      text: 'Plain.',
    });
    assert.equal(textOnly.sanitized.scripts, 0);
    const approval = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'Pay invoice 7' });
    assert.equal(approval.sanitized, undefined, 'only an email has a draft to sanitize');
  });

  it('the relay receives exactly the approved draft', async () => {
    const subject = `Approved as shown ${Date.now()}`;
    const created = await sendEmail(subject);
    const listed = (await approver.get(`/v1/requests?state=pending&mailbox_id=${mailboxId}`)).body.requests.find(
      (r: { request_id: string }) => r.request_id === created.request_id,
    );
    const decided = await approver.post(`/v1/requests/${created.request_id}/approve`, {
      content_sha256: listed.content_sha256,
    });
    assert.equal(decided.status, 200, JSON.stringify(decided.body));
    const [mail] = await waitFor('the approved mail at the relay', async () => {
      const mails = await receivedWithSubject(subject);
      return mails.length > 0 ? mails : undefined;
    });
    assert.equal(mail.html, '<p>Hello <b>there</b></p>');
    for (const gone of ['tracker.example.net', 'script', 'relative.gif', 'onclick']) {
      assert.ok(!mail.html || !mail.html.includes(gone), `${gone} did not leave`);
      assert.ok(!mail.textAsHtml?.includes(gone));
    }
    assert.equal(mail.text?.trim(), 'Plain text.');
  });

  it('a REST decision of other content is refused with 409 content_changed and changes nothing', async () => {
    const created = await sendEmail('Refused when not what was seen');
    const other = 'f'.repeat(64);
    for (const path of ['approve', 'reject']) {
      const res = await approver.post(`/v1/requests/${created.request_id}/${path}`, { content_sha256: other });
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.equal(res.body.error, 'conflict');
      assert.equal(res.body.reason, 'content_changed');
    }
    const malformed = await approver.post(`/v1/requests/${created.request_id}/approve`, { content_sha256: 'abc' });
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.error, 'invalid_request');
    assert.equal(await stateOf(created.request_id), 'pending');

    // A row changed behind the service's back (the hash left as it was) cannot be approved at all.
    await server.db.query(
      `UPDATE approval_requests SET email = jsonb_set(email, '{to}', '["eve@evil.example"]') WHERE id = $1`,
      [created.request_id],
    );
    const tampered = await approver.post(`/v1/requests/${created.request_id}/approve`, {});
    assert.equal(tampered.status, 409, JSON.stringify(tampered.body));
    assert.equal(tampered.body.reason, 'content_changed');
    assert.equal(await stateOf(created.request_id), 'pending');
    const events = await server.db.query<{ type: string }>(
      `SELECT type FROM events WHERE request_id = $1 ORDER BY id`,
      [created.request_id],
    );
    assert.deepEqual(
      events.map((e) => e.type),
      ['request_created', 'request_state_changed'],
      'only the creation was logged',
    );
  });

  browserIt(
    'the console names what was removed above the draft, loads nothing, and refuses a changed request',
    async () => {
      await page.goto(`${server.url}/console/sign-in`);
      await page.getByLabel('Token').fill(approverSecret);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${server.url}/console`);

      const created = await sendEmail('Shown in the console');
      fetched.length = 0;
      await page.goto(`${server.url}/console/requests/${created.request_id}`);
      const notice = await page.locator('.sanitized-notice').innerText();
      assert.match(notice, /Removed before this request was made: 1 script, 1 event handler, 1 remote resource/);
      assert.match(notice, /1 resource by relative address/);
      assert.equal(await page.frameLocator('iframe.draft-html').locator('p').innerText(), 'Hello there');
      assert.deepEqual(
        fetched.filter((u) => /relative\.gif|tracker|pixel/.test(u)),
        [],
        'neither the relative nor the remote image was fetched',
      );

      // The page was opened; then the request changes. Approving what the page showed is refused.
      await editText(created.request_id, 'Something else entirely.');
      await page.getByRole('button', { name: 'Approve' }).click();
      await page.waitForLoadState();
      assert.match(await page.locator('main').innerText(), /The request is not what you saw/);
      assert.equal(await stateOf(created.request_id), 'pending');

      // Reloaded, the page shows the request as it is, and approving that works.
      await page.goto(`${server.url}/console/requests/${created.request_id}`);
      assert.match(await page.locator('.draft-text').innerText(), /Something else entirely/);
      await page.getByRole('button', { name: 'Approve' }).click();
      await page.waitForURL(`${server.url}/console/requests/${created.request_id}?notice=decided`);
      assert.equal(await stateOf(created.request_id), 'approved');
    },
  );

  browserIt('the approval link shows the sanitized draft and refuses a decision of changed content', async () => {
    const created = await sendEmail('Decided by link', {}, linkMailboxId);
    const link = await waitFor('the approval mail with its link', async () => {
      for (const received of await relay.received()) {
        const parsed = await simpleParser(received.raw);
        if (parsed.text?.includes(created.request_id)) {
          assert.match(parsed.text, /Removed from the agent's HTML before the request was made: 1 script/);
          return /https?:\/\/\S+\/console\/links\/[A-Za-z0-9_-]+/.exec(parsed.text)?.[0];
        }
      }
      return undefined;
    });
    const linkPage = await context.newPage();
    fetched.length = 0;
    await linkPage.goto(link);
    assert.match(await linkPage.locator('.sanitized-notice').innerText(), /1 remote resource/);
    assert.equal(await linkPage.frameLocator('iframe.draft-html').locator('p').innerText(), 'Hello there');
    assert.deepEqual(
      fetched.filter((u) => /relative\.gif|tracker|pixel/.test(u)),
      [],
    );

    await editText(created.request_id, 'Changed after the link was opened.');
    await linkPage.getByRole('button', { name: 'Approve' }).click();
    await linkPage.waitForLoadState();
    assert.match(await linkPage.locator('main').innerText(), /The request is not what you saw/);
    assert.equal(await stateOf(created.request_id), 'pending');

    await linkPage.goto(link);
    await linkPage.getByRole('button', { name: 'Approve' }).click();
    await linkPage.waitForLoadState();
    assert.match(await linkPage.locator('main').innerText(), /You approved/);
    assert.equal(await stateOf(created.request_id), 'approved');
  });

  it('the outbox never sends a message that is not the approved content', async () => {
    const subject = `Changed after approval ${Date.now()}`;
    await relay.setMode('tempfail-rcpt');
    const created = await sendEmail(subject);
    const approved = await approver.post(`/v1/requests/${created.request_id}/approve`, {});
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    const messageId = approved.body.sent_message_id as string;
    const deliveryOf = async () => (await callOk(agent, 'get_message', { message_id: messageId })).delivery;
    await waitFor(
      'a delivery attempt the relay refused for now',
      async () => (await deliveryOf()).status === 'retrying',
    );

    await server.db.query(`UPDATE messages SET text_body = 'Wire the money to account 666.' WHERE id = $1`, [
      messageId,
    ]);
    await relay.setMode('accept');
    const failed = await waitFor('the delivery to fail', async () => {
      const delivery = await deliveryOf();
      return delivery.status === 'failed' ? delivery : undefined;
    });
    assert.equal(failed.reason, 'content_changed');
    assert.match(failed.error, /content_changed/);
    const request = await callOk(agent, 'get_request', { request_id: created.request_id });
    assert.equal(request.delivery.reason, 'content_changed');
    assert.deepEqual(await receivedWithSubject(subject), [], 'nothing was sent');
    const statuses = await server.db.query<{ status: string }>(
      `SELECT payload->>'status' AS status FROM events WHERE type = 'message_delivery_changed' AND message_id = $1 ORDER BY id`,
      [messageId],
    );
    assert.equal(statuses.at(-1)!.status, 'failed');
  });
});
