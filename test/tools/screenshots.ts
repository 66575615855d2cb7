import 'reflect-metadata';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Page } from 'playwright-core';
import { createRootLogger } from '#app/logging/logger.js';
import { KeptMailStore } from '#app/outbox/kept-mail.js';
import { launchChromium } from '../support/browser';
import { callOk, connectMcp } from '../support/mcp';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const OUT = join(process.cwd(), 'docs', 'screenshots');
const USAGE = `Usage: DATABASE_URL=postgres://… npm run docs:screenshots

Starts Alcarta on a fresh database on that PostgreSQL server (created and dropped again), seeds a
plausible accounts-payable mailbox, and captures the console with Chromium (/usr/bin/chromium, or
ALCARTA_TEST_CHROMIUM) into docs/screenshots/.`;

const INVOICE_TEXT = `Dear Accounts Payable team,

please find attached invoice INV-20931 for the November deliveries to your Rotterdam warehouse
(PO 7781-NW, 36 pallets of packaging material).

Amount due: EUR 4,860.00
Due date: 18 December 2026
IBAN: NL91 ABNA 0417 1643 00

If the early-payment discount of 2 % applies, please pay by 8 December.

Kind regards,
Marta Kowalski
Billing, Acme Supplies B.V.`;

const REPLY_TEXT = `Dear Marta,

thank you for invoice INV-20931 (PO 7781-NW). It matches our goods receipt of 28 November and is
approved for payment.

We will pay EUR 4,762.80 on 8 December, taking the 2 % early-payment discount.

Best regards,
Accounts Payable
Northwind Trading`;

/** The agent's HTML, with what a careless template adds: a tracking pixel and a script. */
const REPLY_HTML = `<p>Dear Marta,</p>
<p>thank you for invoice <b>INV-20931</b> (PO 7781-NW). It matches our goods receipt of 28 November
and is <b>approved for payment</b>.</p>
<table border="1" cellpadding="4"><tr><th>Invoice</th><th>Amount</th><th>Discount</th><th>We pay</th></tr>
<tr><td>INV-20931</td><td>EUR 4,860.00</td><td>2 %</td><td>EUR 4,762.80 on 8 Dec</td></tr></table>
<p>Best regards,<br>Accounts Payable<br>Northwind Trading</p>
<img src="https://track.mailer.example/open.gif?id=8812" width="1" height="1" alt="">
<script>fetch("https://track.mailer.example/js")</script>`;

/** Captures `page` whole: a viewport as tall as the page (Chromium leaves a sandboxed frame below the fold blank in full-page captures). */
async function captureWhole(page: Page, width: number, file: string): Promise<void> {
  await page.setViewportSize({ width, height: 800 });
  const height = Number(await page.evaluate('document.documentElement.scrollHeight'));
  await page.setViewportSize({ width, height });
  await page.screenshot({ path: join(OUT, file) });
  process.stdout.write(`docs/screenshots/${file}\n`);
}

async function seed(server: TestServer, agent: Client, mailbox: string) {
  const invoice = await ingest(server.admin, mailbox, {
    from: 'billing@acme-supplies.example',
    to: ['ap@northwind-trading.example'],
    subject: 'Invoice INV-20931 for November deliveries (due 18 Dec)',
    text: INVOICE_TEXT,
  });
  const reply = (
    await callOk(agent, 'send_email', {
      mailbox_id: mailbox,
      in_reply_to_message_id: invoice,
      to: ['billing@acme-supplies.example'],
      cc: ['controller@northwind-trading.example'],
      subject: 'Re: Invoice INV-20931 for November deliveries (due 18 Dec)',
      text: REPLY_TEXT,
      html: REPLY_HTML,
      expires_in_seconds: 4 * 3600,
    })
  ).request_id as string;
  const payment = (
    await callOk(agent, 'request_approval', {
      mailbox_id: mailbox,
      title: 'Pay INV-20931 to Acme Supplies: EUR 4,762.80 on 8 Dec',
      details: 'Three-way match passed: PO 7781-NW, goods receipt GR-55102, invoice INV-20931.',
      expires_in_seconds: 26 * 3600,
    })
  ).request_id as string;
  const vendor = (
    await callOk(agent, 'request_approval', {
      mailbox_id: mailbox,
      title: 'Update the bank account of Globex Logistics',
      details: 'Their mail of 2 Dec asks to pay to a new IBAN from now on.',
      expires_in_seconds: 45 * 60,
    })
  ).request_id as string;
  const statement = (
    await callOk(agent, 'send_email', {
      mailbox_id: mailbox,
      to: ['ar@initech.example'],
      subject: 'Statement of account, November 2026',
      text: 'Hello,\n\nattached is your statement of account for November. Two invoices are open.\n\nAccounts Payable',
    })
  ).request_id as string;
  return { reply, payment, vendor, statement };
}

async function main(): Promise<void> {
  if (!process.env.DATABASE_URL || process.argv.includes('--help')) {
    process.stdout.write(`${USAGE}\n`);
    process.exitCode = process.argv.includes('--help') ? 0 : 2;
    return;
  }
  const launched = await launchChromium();
  if ('skip' in launched) throw new Error(launched.skip);
  const browser = launched.browser;
  const server = await startTestServer({
    ownPublicUrl: true,
    env: { ALCARTA_SMTP_RELAY_URL: 'console:' },
    logger: createRootLogger('warn', process.stderr),
  });
  let agent: Client | undefined;
  try {
    const mailbox = await createMailbox(server.admin, 'ap@northwind-trading.example');
    const approver = await createToken(server.admin, {
      name: 'Dana Whitfield',
      scopes: ['approvals:decide'],
      mailboxes: [mailbox],
    });
    const agentToken = await createToken(server.admin, {
      name: 'Invoice assistant',
      scopes: ['mail:read', 'mail:send', 'approvals:read'],
      mailboxes: [mailbox],
    });
    await server.admin.request('PUT', `/v1/mailboxes/${mailbox}/approvers`, {
      emails: ['dana.whitfield@northwind-trading.example'],
    });
    agent = await connectMcp(server.url, agentToken.secret);
    const requests = await seed(server, agent, mailbox);
    const kept = server.running.app.get(KeptMailStore);
    const approvalMail = await waitFor('the approval mail of the reply', () =>
      kept.list({ all: true }).find((m) => m.kind === 'approval_mail' && m.text.includes('INV-20931 for November')),
    );
    const link = /https?:\/\/\S+\/console\/links\/\S+/.exec(approvalMail.text)![0];

    mkdirSync(OUT, { recursive: true });
    const context = await browser.newContext({ locale: 'en-US', timezoneId: 'Europe/Amsterdam' });
    const page = await context.newPage();
    await page.goto(`${server.url}/console/sign-in`);
    await page.getByLabel('Token').fill(approver.secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${server.url}/console`);

    // The link page first: deciding anything else would not change it, but it is the approver's mail.
    const phone = await browser.newContext({ locale: 'en-US', timezoneId: 'Europe/Amsterdam' });
    const linkPage = await phone.newPage();
    await linkPage.goto(link);
    await linkPage.frameLocator('iframe.draft-html').locator('p').first().waitFor();
    await captureWhole(linkPage, 375, 'approval-link-375.png');
    await phone.close();

    // Some history: the statement approved (so the outbox has a sent mail), the bank change rejected.
    for (const [id, verb, reason] of [
      [requests.statement, 'approve', 'Figures checked against the ledger.'],
      [requests.vendor, 'reject', 'Bank changes need a call-back to a known number first.'],
    ] as const) {
      await page.goto(`${server.url}/console/requests/${id}`);
      await page.getByLabel('Reason (optional)').fill(reason);
      await page.getByRole('button', { name: verb === 'approve' ? 'Approve' : 'Reject' }).click();
      await page.waitForURL(/notice=decided/);
    }
    await callOk(agent, 'request_approval', {
      mailbox_id: mailbox,
      title: 'Credit note CN-1187 for the damaged pallets (EUR 312.00)',
      expires_in_seconds: 3 * 3600,
    });

    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${server.url}/console`);
    await page.screenshot({ path: join(OUT, 'console-pending-1280.png') });
    process.stdout.write('docs/screenshots/console-pending-1280.png\n');

    await page.goto(`${server.url}/console/requests/${requests.reply}`);
    await page.frameLocator('iframe.draft-html').locator('p').first().waitFor();
    await captureWhole(page, 1280, 'console-request-1280.png');

    // The decision bar on a phone, as the page opens: Approve and Reject in view above the fold.
    await page.setViewportSize({ width: 375, height: 667 });
    await page.goto(`${server.url}/console/requests/${requests.reply}`);
    await page.screenshot({ path: join(OUT, 'console-request-375.png') });
    process.stdout.write('docs/screenshots/console-request-375.png\n');

    await waitFor('the approved statement kept', () =>
      kept.list({ all: true }).some((m) => m.kind === 'message' && m.subject.startsWith('Statement')),
    );
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${server.url}/console/outbox`);
    await page.screenshot({ path: join(OUT, 'console-outbox-1280.png') });
    process.stdout.write('docs/screenshots/console-outbox-1280.png\n');
    await context.close();
  } finally {
    await agent?.close();
    await browser.close();
    await server.close();
  }
}

main().catch((err: Error) => {
  process.stderr.write(`${err.stack ?? err.message}\n`);
  process.exitCode = 1;
});
