import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Browser, BrowserContext, Locator, Page, Response } from 'playwright-core';
import { KeptMailStore } from '#app/outbox/kept-mail.js';
import { axeViolations, launchChromium } from '../support/browser';
import { callOk, connectMcp } from '../support/mcp';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** The sizes the decision must be in view at without scrolling: a laptop and a small phone. */
const VIEWPORTS = [
  { width: 1280, height: 800 },
  { width: 375, height: 667 },
];
/** The console's colours (console.css): the accent of primary buttons, and red. */
const ACCENT = 'rgb(11, 87, 208)';
const DANGER = 'rgb(179, 38, 30)';
const WHITE = 'rgb(255, 255, 255)';

const LONG_TEXT = Array.from(
  { length: 60 },
  (_, i) => `Line ${i + 1} of the payment run: invoice ${4100 + i}, Northwind Traders, EUR ${(i + 1) * 125}.00`,
).join('\n');

/** Whether the whole element is inside the viewport, and is what a click at its centre would hit. */
async function inViewUncovered(locator: Locator): Promise<boolean> {
  return locator.evaluate((el) => {
    const window = globalThis as any;
    const box = el.getBoundingClientRect();
    const inside = box.top >= 0 && box.left >= 0 && box.bottom <= window.innerHeight && box.right <= window.innerWidth;
    const hit = window.document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    return inside && box.height > 0 && (hit === el || el.contains(hit));
  });
}

/** The computed colours and border of a button. */
async function buttonLook(locator: Locator) {
  return locator.evaluate((el) => {
    const style = (globalThis as any).getComputedStyle(el);
    return {
      background: style.backgroundColor,
      color: style.color,
      border: `${style.borderTopStyle} ${style.borderTopColor}`,
    };
  });
}

/**
 * The console's polish: the decision bar in view on load, a red outlined Reject on the request page
 * and the approval link's page alike, that page on the console's stylesheet, the favicon on every
 * page (no resource answers 404), the header's pending count and its live update, relative expiry.
 */
describe('console polish', () => {
  let server: TestServer;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let mailbox: string;
  let approver: { id: string; secret: string };
  let agent: Client;
  let context: BrowserContext;
  let page: Page;
  let longRequest: string;
  let linkPath: string;

  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };
  const url = (path: string) => `${server.url}${path}`;

  before(async () => {
    server = await startTestServer({ ownPublicUrl: true, env: { ALCARTA_SMTP_RELAY_URL: 'console:' } });
    mailbox = await createMailbox(server.admin, `accounts-${process.pid}@example.com`);
    approver = await createToken(server.admin, { name: 'Ann', scopes: ['approvals:decide'], mailboxes: [mailbox] });
    const agentToken = await createToken(server.admin, {
      name: 'Invoice agent',
      scopes: ['mail:send', 'approvals:read'],
      mailboxes: [mailbox],
    });
    agent = await connectMcp(server.url, agentToken.secret);
    const set = await server.admin.request('PUT', `/v1/mailboxes/${mailbox}/approvers`, {
      emails: ['ann@approvers.example'],
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    longRequest = (
      await callOk(agent, 'send_email', {
        mailbox_id: mailbox,
        to: ['accounts@northwind.example'],
        subject: 'Payment run of December: sixty invoices, with the remittance advice for each',
        text: LONG_TEXT,
        html: LONG_TEXT.split('\n')
          .map((line) => `<p>${line}</p>`)
          .join(''),
        expires_in_seconds: 3 * 3600,
      })
    ).request_id as string;
    const kept = await waitFor('the approval mail kept', () =>
      server.running.app
        .get(KeptMailStore)
        .list({ all: true })
        .find((m) => m.kind === 'approval_mail'),
    );
    linkPath = new URL(/https?:\/\/\S+\/console\/links\/\S+/.exec(kept.text)![0]).pathname;
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    await agent?.close();
    await browser?.close();
    await server?.close();
  });

  browserIt('signs in; the header counts the pending requests, and the count follows new ones live', async () => {
    context = await browser!.newContext({ locale: 'en-US', timezoneId: 'UTC' });
    page = await context.newPage();
    await page.goto(url('/console/sign-in'));
    await page.getByLabel('Token').fill(approver.secret);
    const streamed = page.waitForResponse((r) => new URL(r.url()).pathname === '/console/events');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(url('/console'));
    assert.equal((await streamed).status(), 200);
    const count = page.locator('#pending-count');
    assert.equal(await count.innerText(), '1');
    assert.equal(await page.getByRole('link', { name: 'Pending 1 waiting' }).count(), 1);

    await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Pay invoice 4711 early' });
    await waitFor('the live count', async () => (await count.innerText()) === '2');
    await page.getByRole('link', { name: 'History' }).click();
    await page.waitForURL(url('/console/history'));
    assert.equal(await count.innerText(), '2');
  });

  browserIt('expiry reads relative ("in 3 hours"), with the absolute time as its tooltip', async () => {
    await page.goto(url('/console'));
    const expiry = page.locator(`li[data-request-id="${longRequest}"] .expires time`);
    assert.equal(await expiry.innerText(), 'in 3 hours');
    const iso = (await expiry.getAttribute('datetime'))!;
    const absolute = new Intl.DateTimeFormat('en-US', {
      dateStyle: 'medium',
      timeStyle: 'short',
      timeZone: 'UTC',
    }).format(new Date(iso));
    assert.equal(await expiry.getAttribute('title'), absolute);
    assert.ok(Math.abs(new Date(iso).getTime() - Date.now() - 3 * 3600_000) < 60_000);

    await page.goto(url(`/console/requests/${longRequest}`));
    const facts = page.locator('dl.facts time[data-relative]');
    assert.equal(await facts.innerText(), 'in 3 hours');
    assert.equal(await facts.getAttribute('title'), absolute);
  });

  for (const viewport of VIEWPORTS) {
    const size = `${viewport.width}×${viewport.height}`;
    browserIt(`the decision bar is in view on load at ${size}, on the request page and the link page`, async () => {
      const view = await browser!.newContext({ viewport, storageState: await context.storageState() });
      try {
        const p = await view.newPage();
        for (const path of [`/console/requests/${longRequest}`, linkPath]) {
          await p.goto(url(path));
          const height = Number(await p.evaluate('document.documentElement.scrollHeight'));
          assert.ok(height > viewport.height * 2, `${path}: the body is long (${height} px)`);
          for (const name of ['Approve', 'Reject']) {
            const button = p.getByRole('button', { name, exact: true });
            assert.ok(await inViewUncovered(button), `${path} at ${size}: ${name} in view on load`);
          }
          assert.ok(await inViewUncovered(p.getByLabel('Reason (optional)')), `${path}: the reason field too`);
          await p.getByText('Line 30 of the payment run').scrollIntoViewIfNeeded();
          assert.ok(await inViewUncovered(p.getByRole('button', { name: 'Approve' })), `${path}: still, mid-page`);
          const width = Number(await p.evaluate('document.documentElement.scrollWidth'));
          assert.ok(width <= viewport.width, `${path} is ${width} px wide at ${viewport.width} px`);
        }
      } finally {
        await view.close();
      }
    });
  }

  browserIt('Reject is outlined in red and Approve is the primary button, on both pages', async () => {
    for (const path of [`/console/requests/${longRequest}`, linkPath]) {
      await page.goto(url(path));
      const approve = await buttonLook(page.getByRole('button', { name: 'Approve' }));
      const reject = await buttonLook(page.getByRole('button', { name: 'Reject' }));
      assert.deepEqual(approve, { background: ACCENT, color: WHITE, border: `solid ${ACCENT}` }, path);
      assert.deepEqual(reject, { background: WHITE, color: DANGER, border: `solid ${DANGER}` }, path);
    }
    // The link page is a console page: its stylesheet, layout and header, not the browser's defaults.
    await page.goto(url(linkPath));
    assert.equal(await page.locator('link[rel="stylesheet"]').getAttribute('href'), '/console/assets/console.css');
    assert.equal(await page.locator('header.site-header .brand').innerText(), 'Alcarta');
    const style = (locator: Locator, property: string) =>
      locator.evaluate((el, name) => (globalThis as any).getComputedStyle(el)[name] as string, property);
    assert.equal(await style(page.locator('body'), 'margin'), '0px');
    assert.equal(await style(page.locator('dl.request-summary'), 'display'), 'grid');
  });

  browserIt('every kind of page links the favicon, and no resource of any answers 404', async () => {
    const icon = await fetch(url('/console/assets/favicon.svg'));
    assert.equal(icon.status, 200);
    assert.equal(icon.headers.get('content-type'), 'image/svg+xml');
    assert.match(await icon.text(), /^<svg /);

    const kept = server.running.app.get(KeptMailStore).list({ all: true })[0];
    const signedOut = await browser!.newContext();
    try {
      const pages: Array<[Page, string, number]> = [];
      const anonymous = await signedOut.newPage();
      pages.push([anonymous, '/console/sign-in', 200]);
      pages.push([anonymous, linkPath, 200]);
      // Shaped like a link's token, so the request log masks it as it would a real one.
      pages.push([anonymous, `/console/links/${randomBytes(32).toString('base64url')}`, 404]);
      pages.push([anonymous, '/console/sign-in?expired=1', 200]);
      for (const path of ['/console', '/console/history', `/console/requests/${longRequest}`, '/console/outbox']) {
        pages.push([page, path, 200]);
      }
      pages.push([page, `/console/outbox/${kept.id}`, 200]);
      pages.push([page, '/console/requests/chk_0000000000000000000000000', 404]);
      for (const [p, path, status] of pages) {
        const failed: string[] = [];
        const onResponse = (r: Response) => {
          if (r.status() >= 400 && r.request().resourceType() !== 'document') failed.push(`${r.status()} ${r.url()}`);
        };
        p.on('response', onResponse);
        const shown = await p.goto(url(path));
        await p.waitForLoadState('load');
        p.off('response', onResponse);
        assert.equal(shown!.status(), status, path);
        assert.deepEqual(failed, [], path);
        assert.equal(
          await p.locator('link[rel="icon"]').getAttribute('href'),
          '/console/assets/favicon.svg',
          `${path} links the favicon`,
        );
      }
    } finally {
      await signedOut.close();
    }
  });

  browserIt('the request, link and outbox pages pass axe and fit the screen at both sizes', async () => {
    // The scan only: bypassCSP lets axe's source be added as a script; the pages themselves are unchanged.
    const scan = await browser!.newContext({ bypassCSP: true, storageState: await context.storageState() });
    try {
      const p = await scan.newPage();
      const kept = server.running.app.get(KeptMailStore).list({ all: true })[0];
      for (const path of [
        `/console/requests/${longRequest}`,
        linkPath,
        '/console/outbox',
        `/console/outbox/${kept.id}`,
      ]) {
        for (const viewport of VIEWPORTS) {
          await p.setViewportSize(viewport);
          await p.goto(url(path));
          assert.deepEqual(await axeViolations(p), [], `${path} at ${viewport.width} px`);
          const width = Number(await p.evaluate('document.documentElement.scrollWidth'));
          assert.ok(width <= viewport.width, `${path} is ${width} px wide at ${viewport.width} px`);
        }
      }
    } finally {
      await scan.close();
    }
  });
});
