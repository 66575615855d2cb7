import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createTransport } from 'nodemailer';
import { dkimKey, dkimSigned } from '../support/dkim';
import { dnsZone } from '../support/dns-zone';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const SELECTOR = 's1';
const KEY = dkimKey();

/**
 * docs/mail.md sender authentication of mail that arrives over SMTP: SPF of the connecting client
 * and MAIL FROM (only SMTP has them), DKIM and DMARC, shown on the message and in the wait event,
 * and the `from_verified` filter that lets an agent ignore forged senders. DNS answers come from a
 * table.
 */
describe('sender authentication of SMTP mail', () => {
  let server: TestServer;
  let agent: Client;
  let mailboxId: string;
  let address: string;
  const zone = dnsZone({
    'sender.example': { TXT: ['v=spf1 ip4:127.0.0.1 -all'] },
    '_dmarc.sender.example': { TXT: ['v=DMARC1; p=reject'] },
    [`${SELECTOR}._domainkey.sender.example`]: { TXT: [KEY.record] },
    'bank.example': { TXT: ['v=spf1 ip4:192.0.2.1 -all'] },
    '_dmarc.bank.example': { TXT: ['v=DMARC1; p=reject'] },
  });

  const rawMessage = (from: string, subject: string) =>
    [
      `From: ${from}`,
      `To: ${address}`,
      `Subject: ${subject}`,
      `Message-ID: <${randomUUID()}@${from.split('@')[1]}>`,
      `Date: ${new Date().toUTCString()}`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      `${subject}, by SMTP.`,
      '',
    ].join('\r\n');

  /** Sends `raw` from the loopback address with `mailFrom` as the envelope sender. */
  const send = async (mailFrom: string, raw: string) => {
    const transport = createTransport({ host: '127.0.0.1', port: server.running.smtpPort!, secure: false });
    try {
      const info = await transport.sendMail({ envelope: { from: mailFrom, to: [address] }, raw });
      assert.match(info.response, /^250 /);
    } finally {
      transport.close();
    }
  };

  const messageWithSubject = async (subject: string) => {
    const page = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 100 });
    const summary = (page.messages as Array<{ message_id: string; subject: string }>).find(
      (m) => m.subject === subject,
    );
    assert.ok(summary, `a message with subject ${subject}`);
    return callOk(agent, 'get_message', { message_id: summary.message_id });
  };

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_SMTP_PORT: '0' }, dnsResolver: zone });
    address = `auth-${process.pid}@example.com`;
    mailboxId = await createMailbox(server.admin, address);
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  it('a signed message from an SPF-permitted client passes SPF, DKIM and DMARC: from_verified', async () => {
    const signed = await dkimSigned(rawMessage('Alice <alice@sender.example>', 'Signed invoice'), {
      domain: 'sender.example',
      selector: SELECTOR,
      privateKey: KEY.privateKey,
    });
    await send('alice@sender.example', signed);
    const message = await messageWithSubject('Signed invoice');
    assert.deepEqual(message.authentication, { spf: 'pass', dkim: 'pass', dmarc: 'pass', arc: 'none' });
    assert.equal(message.from_verified, true);
  });

  it('a forged From fails SPF and DMARC, and a from_verified wait passes it over for the genuine one', async () => {
    const wait = callOk(agent, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId, from_verified: true },
      timeout_seconds: 60,
    });
    await waitFor('the wait to park', async () => (await activeWaits(server.url, 'message')) === 1);

    await send('ceo@bank.example', rawMessage('CEO <ceo@bank.example>', 'Urgent wire transfer'));
    const forged = await messageWithSubject('Urgent wire transfer');
    assert.deepEqual(forged.authentication, { spf: 'fail', dkim: 'none', dmarc: 'fail', arc: 'none' });
    assert.equal(forged.from_verified, false);

    const genuine = await dkimSigned(rawMessage('alice@sender.example', 'Genuine follow-up'), {
      domain: 'sender.example',
      selector: SELECTOR,
      privateKey: KEY.privateKey,
    });
    await send('alice@sender.example', genuine);
    const result = await wait;
    assert.equal(result.matched, true);
    assert.deepEqual(
      (result.events as Array<{ subject: string; from_verified: boolean; authentication: object }>).map((e) => [
        e.subject,
        e.from_verified,
        e.authentication,
      ]),
      [['Genuine follow-up', true, { spf: 'pass', dkim: 'pass', dmarc: 'pass', arc: 'none' }]],
      'only the verified message wakes the wait, with its authentication in the event',
    );
  });
});
