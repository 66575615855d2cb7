import 'reflect-metadata';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Browser } from 'playwright-core';
import { validateEnvironment } from '#app/config/environment.js';
import { createRootLogger } from '#app/logging/logger.js';
import { KeptMailStore } from '#app/outbox/kept-mail.js';
import { launchChromium } from '../support/browser';
import { postSignIn } from '../support/console';
import { callOk, connectMcp } from '../support/mcp';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** The session cookie a token sign-in sets, as a Cookie header. */
async function sessionCookie(serverUrl: string, secret: string): Promise<string> {
  const res = await postSignIn(serverUrl, secret);
  assert.equal(res.status, 303);
  return res.headers.getSetCookie()[0].split(';')[0];
}

/**
 * ALCARTA_SMTP_RELAY_URL=console:, for local development: outbound mail (approved emails, approval
 * mails to approvers) is composed as for a relay but kept, counted as sent, and shown on the
 * console's outbox page to those who reach its mailbox. Without it the page does not exist.
 */
describe('console outbox (ALCARTA_SMTP_RELAY_URL=console:)', () => {
  let server: TestServer;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let log = '';
  let mailbox: string;
  let otherMailbox: string;
  let approver: { id: string; secret: string };
  let agent: Client;

  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        log += chunk.toString();
        done();
      },
    });
    server = await startTestServer({
      ownPublicUrl: true,
      env: { ALCARTA_SMTP_RELAY_URL: 'console:' },
      logger: createRootLogger('warn', sink),
    });
    mailbox = await createMailbox(server.admin, `billing-${process.pid}@example.com`);
    otherMailbox = await createMailbox(server.admin);
    approver = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailbox] });
    const agentToken = await createToken(server.admin, {
      name: 'Billing agent',
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
  });

  it('accepts console: and nothing else that is not an smtp(s) URL', () => {
    const base = { DATABASE_URL: 'postgres://localhost/x', ALCARTA_SMTP_RELAY_URL: 'console:' };
    assert.equal(validateEnvironment(base).ALCARTA_SMTP_RELAY_URL, 'console:');
    for (const wrong of ['console', 'console:x', 'console://', 'http://relay.example']) {
      assert.throws(() => validateEnvironment({ ...base, ALCARTA_SMTP_RELAY_URL: wrong }), /ALCARTA_SMTP_RELAY_URL/);
    }
  });

  it('warns at start-up that mail is kept, not sent, and names the page', () => {
    const warning = log
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { level: string; msg: string; outbox_page?: string })
      .find((entry) => entry.msg.includes('ALCARTA_SMTP_RELAY_URL=console:'));
    assert.ok(warning, log);
    assert.equal(warning.level, 'warn');
    assert.match(warning.msg, /kept, not sent/);
    assert.equal(warning.outbox_page, `${server.url}/console/outbox`);
  });

  it('an approved send_email is kept, delivered as sent, and shown with its recipients, subject and body', async () => {
    const approvers = await server.admin.request('PUT', `/v1/mailboxes/${mailbox}/approvers`, {
      emails: ['ann@approvers.example'],
    });
    assert.equal(approvers.status, 200, JSON.stringify(approvers.body));
    const requestId = (
      await callOk(agent, 'send_email', {
        mailbox_id: mailbox,
        to: ['accounts@northwind.example'],
        cc: ['finance@northwind.example'],
        subject: 'Invoice 2211: payment scheduled',
        text: 'Hello,\n\npayment of invoice 2211 is scheduled for Friday.\n\nBest regards',
        html: '<p>Hello,</p><p>payment of invoice <b>2211</b> is scheduled for Friday.</p>',
      })
    ).request_id as string;
    await callOk(agent, 'request_approval', { mailbox_id: otherMailbox, title: 'Not for this approver' });
    // Kept before the decision, which would make it obsolete.
    const kept = server.running.app.get(KeptMailStore);
    await waitFor('the approval mail kept', () => kept.list({ all: true }).some((m) => m.kind === 'approval_mail'));
    const decided = await server.admin.post(`/v1/requests/${requestId}/approve`, {});
    assert.equal(decided.status, 200, JSON.stringify(decided.body));
    const delivery = await waitFor('the delivery recorded', async () => {
      const d = (await callOk(agent, 'get_request', { request_id: requestId })).delivery;
      return d?.status === 'sent' ? d : undefined;
    });
    assert.match(delivery.response, /kept in the console outbox/);

    const cookie = await sessionCookie(server.url, approver.secret);
    const list = await fetch(`${server.url}/console/outbox`, { headers: { cookie } });
    assert.equal(list.status, 200);
    const html = await list.text();
    assert.match(html, /Invoice 2211: payment scheduled/);
    assert.match(html, /accounts@northwind\.example, finance@northwind\.example/);
    // The approval mail of the request, to the mailbox's approver, with its link.
    assert.match(html, /Approval mail/);
    assert.doesNotMatch(html, /Not for this approver/, 'mail of a mailbox the credential does not reach');
    assert.match(html, /<a href="\/console">Pending[^<]*<span class="count"><span id="pending-count">0</);
    assert.match(html, /<a href="\/console\/outbox">Outbox<\/a>/);

    const sent = /<a href="(\/console\/outbox\/\d+)">Invoice 2211/.exec(html)![1];
    if (skipReason) return;
    const context = await browser!.newContext();
    try {
      const [name, value] = cookie.split('=');
      await context.addCookies([{ name, value, url: server.url }]);
      const page = await context.newPage();
      await page.goto(`${server.url}/console/outbox`);
      await page.getByRole('link', { name: 'Invoice 2211: payment scheduled', exact: true }).click();
      await page.waitForURL(`${server.url}${sent}`);
      assert.equal(await page.locator('dd.kept-to').innerText(), 'accounts@northwind.example');
      assert.match(await page.locator('dl.facts').innerText(), /finance@northwind\.example/);
      assert.match(await page.locator('pre.kept-text').innerText(), /payment of invoice 2211 is scheduled for Friday/);
      const frame = page.frameLocator('iframe.draft-html');
      assert.equal(await frame.locator('b').innerText(), '2211');
      await page.getByText('Source, as the relay would have received it').click();
      const source = await page.locator('pre.mail-source').innerText();
      assert.match(source, /^Subject: Invoice 2211: payment scheduled$/m);
      assert.match(source, /^Cc: finance@northwind\.example$/m);
    } finally {
      await context.close();
    }
  });

  it('a kept mail of another mailbox, or one that does not exist, is not found', async () => {
    const other = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [otherMailbox] });
    const cookie = await sessionCookie(server.url, other.secret);
    const list = await (await fetch(`${server.url}/console/outbox`, { headers: { cookie } })).text();
    assert.match(list, /No mail yet/);
    for (const id of ['1', '2', '999', 'abc', '01']) {
      const res = await fetch(`${server.url}/console/outbox/${id}`, { headers: { cookie } });
      assert.equal(res.status, 404, id);
    }
    const signedOut = await fetch(`${server.url}/console/outbox`, { redirect: 'manual' });
    assert.equal(signedOut.status, 303, 'signed out: the sign-in page');
  });
});

describe('console outbox without console:', () => {
  let server: TestServer;

  before(async () => {
    server = await startTestServer();
  });
  after(() => server?.close());

  it('does not exist: 404 signed in or not, and no Outbox link', async () => {
    const mailbox = await createMailbox(server.admin);
    const approver = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailbox] });
    const cookie = await sessionCookie(server.url, approver.secret);
    for (const headers of [{ cookie }, {}] as Array<Record<string, string>>) {
      for (const path of ['/console/outbox', '/console/outbox/1']) {
        const res = await fetch(`${server.url}${path}`, { headers, redirect: 'manual' });
        assert.equal(res.status, 404, `${path} ${headers.cookie ? 'signed in' : 'signed out'}`);
      }
    }
    const pending = await (await fetch(`${server.url}/console`, { headers: { cookie } })).text();
    assert.doesNotMatch(pending, /\/console\/outbox/);
  });
});
