import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { callOk, connectMcp } from '../support/mcp';
import { TestSmtpRelay } from '../support/smtp-relay';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

const DKIM_SELECTOR = 'alcarta-test';
const DELIVERY_EVENT_FIELDS = ['changed_at', 'mailbox_id', 'message_id', 'request_id', 'status', 'type'];

interface Delivery {
  status: string;
  attempts: number;
  last_attempt_at?: string;
  next_attempt_at?: string;
  response?: string;
  error?: string;
}

/**
 * "Outbound" (docs/mail.md) end to end: an agent sends through MCP `send_email`, a person approves
 * through REST, and the outbox delivers through a real SMTP server (Debian's aiosmtpd) acting as
 * the relay: headers, threading and a DKIM signature mailauth verifies; a relay that is down
 * (retrying, then sent); a 550 (failed at once) and the admin retry; a bounce report; no relay
 * (not_configured); the admin listing with its filters and scoping; the metrics.
 */
describe('outbox: approved mail through a real relay', { skip: requireSystemPackage('python3-aiosmtpd') }, () => {
  let relay: TestSmtpRelay;
  let server: TestServer;
  let keyDir: string;
  let publicKeyDer: string;
  let agent: Client;
  let mailboxId: string;
  let mailboxAddress: string;
  let otherMailboxId: string;

  const deliveryOf = async (messageId: string): Promise<Delivery> =>
    (await callOk(agent, 'get_message', { message_id: messageId })).delivery as Delivery;
  const waitForStatus = (messageId: string, status: string, timeoutMs = 20_000) =>
    waitFor(
      `delivery of ${messageId} to be ${status}`,
      async () => {
        const d = await deliveryOf(messageId);
        return d.status === status ? d : undefined;
      },
      { timeoutMs, intervalMs: 50 },
    );
  const deliveryEvents = async (messageId: string) =>
    (
      await server.db.query<{ payload: Record<string, unknown> }>(
        `SELECT payload FROM events WHERE type = 'message_delivery_changed' AND message_id = $1 ORDER BY id`,
        [messageId],
      )
    ).map((r) => r.payload);

  /** send_email by the agent, approval by a person; returns the request and the outbound message ids. */
  const sendApproved = async (
    args: Record<string, unknown> = {},
    fromMailbox = mailboxId,
  ): Promise<{ requestId: string; messageId: string }> => {
    const { request_id: requestId } = await callOk(agent, 'send_email', {
      mailbox_id: fromMailbox,
      to: ['recipient@example.net'],
      subject: 'Quarterly numbers',
      text: 'Here they are.',
      ...args,
    });
    const res = await server.admin.post(`/v1/requests/${requestId}/approve`, {});
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { requestId, messageId: res.body.sent_message_id as string };
  };

  before(async () => {
    relay = await TestSmtpRelay.start();
    keyDir = await mkdtemp(join(tmpdir(), 'alcarta-dkim-'));
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await writeFile(join(keyDir, 'dkim.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
    publicKeyDer = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    server = await startTestServer({
      env: {
        ALCARTA_SMTP_PORT: 'off',
        ALCARTA_SMTP_RELAY_URL: relay.url,
        ALCARTA_SMTP_RETRY_BASE_SECONDS: '1',
        ALCARTA_OUTBOX_LEASE_SECONDS: '20',
        ALCARTA_DKIM_SELECTOR: DKIM_SELECTOR,
        ALCARTA_DKIM_PRIVATE_KEY_FILE: join(keyDir, 'dkim.pem'),
      },
    });
    mailboxAddress = `agent-${process.pid}@outbox.example`;
    mailboxId = await createMailbox(server.admin, mailboxAddress);
    otherMailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, {
      scopes: ['mail:read', 'mail:send', 'approvals:read', 'mail:ingest'],
      mailboxes: ['*'],
    });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    await relay?.stop();
    if (keyDir) await rm(keyDir, { recursive: true, force: true });
  });

  let sentMessageId: string;
  let sentMessageIdHeader: string;

  it('delivers approved mail with its headers, the thread and a DKIM signature that verifies', async () => {
    // The message replied to came by mail, with a thread of its own.
    const raw = [
      'From: Customer <customer@example.org>',
      `To: ${mailboxAddress}`,
      'Subject: Numbers?',
      'Message-ID: <question-1@example.org>',
      'In-Reply-To: <root-2@example.org>',
      'References: <root-1@example.org> <root-2@example.org>',
      'Date: Tue, 01 Dec 2026 10:00:00 +0000',
      '',
      'Could you send the numbers?',
      '',
    ].join('\r\n');
    const ingested = await server.admin.raw('POST', `/v1/mailboxes/${mailboxId}/messages`, raw, 'message/rfc822');
    assert.equal(ingested.status, 201, JSON.stringify(ingested.body));

    const { requestId, messageId } = await sendApproved({
      to: ['customer@example.org'],
      cc: ['boss@example.org'],
      subject: 'Re: Numbers?',
      text: 'Here they are.',
      html: '<p>Here they are.</p>',
      in_reply_to_message_id: ingested.body.message_id,
    });
    const message = await callOk(agent, 'get_message', { message_id: messageId });
    const [mail] = await waitFor('the relay to receive the mail', async () => {
      const got = await relay.receivedWithMessageId(message.message_id_header);
      return got.length > 0 ? got : undefined;
    });

    assert.equal(mail.mailFrom, mailboxAddress);
    assert.deepEqual([...mail.rcptTos].sort(), ['boss@example.org', 'customer@example.org']);
    const parsed = await simpleParser(mail.raw);
    assert.equal(parsed.from?.value[0].address, mailboxAddress);
    assert.deepEqual(
      [parsed.to, parsed.cc].map((a) => (Array.isArray(a) ? a : [a]).flatMap((x) => x!.value.map((v) => v.address))),
      [['customer@example.org'], ['boss@example.org']],
    );
    assert.equal(parsed.subject, 'Re: Numbers?');
    assert.equal(parsed.text?.trim(), 'Here they are.');
    assert.equal(typeof parsed.html === 'string' && parsed.html.includes('<p>Here they are.</p>'), true);
    assert.equal(parsed.messageId, message.message_id_header);
    assert.match(message.message_id_header, /^<msg_[^@]+@outbox\.example>$/);
    // Date: the time the message was recorded (to the second, as the header has it).
    assert.equal(parsed.date?.getTime(), Math.floor(Date.parse(message.received_at) / 1000) * 1000);
    // Threading: In-Reply-To the parent, References = the parent's References + the parent.
    assert.equal(parsed.inReplyTo, '<question-1@example.org>');
    assert.equal(message.in_reply_to, '<question-1@example.org>');
    assert.deepEqual(parsed.references, ['<root-1@example.org>', '<root-2@example.org>', '<question-1@example.org>']);

    // DKIM, verified by mailauth with the test key published through its resolver (no DNS).
    const queried: string[] = [];
    const verified = await dkimVerify(mail.raw, {
      resolver: (name: string, type: string) => {
        queried.push(`${type} ${name}`);
        if (type === 'TXT' && name === `${DKIM_SELECTOR}._domainkey.outbox.example`) {
          return Promise.resolve([[`v=DKIM1; k=rsa; p=${publicKeyDer}`]]);
        }
        return Promise.reject(Object.assign(new Error(`no ${type} record for ${name}`), { code: 'ENOTFOUND' }));
      },
    });
    assert.deepEqual(queried, [`TXT ${DKIM_SELECTOR}._domainkey.outbox.example`]);
    assert.equal(verified.results.length, 1);
    assert.equal(verified.results[0].status.result, 'pass', JSON.stringify(verified.results[0].status));
    assert.equal(verified.results[0].signingDomain, 'outbox.example');

    const delivery = await waitForStatus(messageId, 'sent');
    assert.equal(delivery.attempts, 1);
    assert.match(delivery.response!, /^250 2\.0\.0 Ok: queued as /);
    assert.equal(delivery.error, undefined);
    assert.equal(delivery.next_attempt_at, undefined);
    assert.ok(delivery.last_attempt_at);

    const events = await deliveryEvents(messageId);
    assert.deepEqual(
      events.map((e) => e.status),
      ['queued', 'sending', 'sent'],
    );
    for (const event of events) {
      assert.deepEqual(Object.keys(event).sort(), DELIVERY_EVENT_FIELDS);
      assert.equal(event.type, 'message_delivery_changed');
      assert.equal(event.mailbox_id, mailboxId);
      assert.equal(event.request_id, requestId);
    }
    sentMessageId = messageId;
    sentMessageIdHeader = message.message_id_header;
  });

  it('retries while the relay is down and delivers once it is back', async () => {
    await relay.pause();
    try {
      const { messageId } = await sendApproved({ subject: 'While the relay is down' });
      const retrying = await waitForStatus(messageId, 'retrying');
      assert.ok(retrying.next_attempt_at, 'a retry is scheduled');
      assert.ok(Date.parse(retrying.next_attempt_at) > Date.parse(retrying.last_attempt_at!));
      assert.match(retrying.error!, /ECONNREFUSED|connect/i);
      assert.doesNotMatch(retrying.error!, /relay-secret-pw/);
      // Backoff: a second failed attempt waits at least as long again.
      const second = await waitFor('a second failed attempt', async () => {
        const d = await deliveryOf(messageId);
        return d.status === 'retrying' && d.attempts >= 2 ? d : undefined;
      });
      assert.ok(Date.parse(second.next_attempt_at!) - Date.parse(second.last_attempt_at!) >= 1000);
      await relay.resume();
      const header = (await callOk(agent, 'get_message', { message_id: messageId })).message_id_header;
      const sent = await waitForStatus(messageId, 'sent');
      assert.ok(sent.attempts >= 3);
      assert.equal((await relay.receivedWithMessageId(header)).length, 1);
      const statuses = (await deliveryEvents(messageId)).map((e) => e.status);
      assert.deepEqual(statuses.slice(0, 3), ['queued', 'sending', 'retrying']);
      assert.equal(statuses[statuses.length - 1], 'sent');
    } finally {
      await relay.resume().catch(() => undefined);
    }
  });

  it('fails at once on a 550, and an admin retry delivers it', async () => {
    await relay.setMode('refuse-rcpt');
    const { messageId } = await sendApproved({ subject: 'To a refused recipient' });
    const failed = await waitForStatus(messageId, 'failed');
    assert.equal(failed.attempts, 1);
    assert.match(failed.error!, /550 5\.1\.1/);
    assert.equal(failed.next_attempt_at, undefined);
    assert.doesNotMatch(failed.error!, /relay-secret-pw/);

    // Retrying a delivery that did not fail, an unknown or an invisible one, is refused.
    const notFailed = await server.admin.post(`/v1/outbox/${sentMessageId}/retry`);
    assert.equal(notFailed.status, 409);
    assert.equal(notFailed.body.error, 'conflict');
    assert.equal(notFailed.body.status, 'sent');
    assert.equal((await server.admin.post('/v1/outbox/msg_doesnotexist0000000000000/retry')).status, 404);
    assert.equal((await server.admin.post('/v1/outbox/not-an-id/retry')).status, 404);
    const otherAdmin = await createToken(server.admin, { scopes: ['admin'], mailboxes: [otherMailboxId] });
    const invisible = await server.admin.withToken(otherAdmin.secret).post(`/v1/outbox/${messageId}/retry`);
    assert.equal(invisible.status, 404);
    assert.equal(invisible.body.error, 'not_found');
    const reader = await createToken(server.admin, { scopes: ['approvals:decide', 'mail:read'], mailboxes: ['*'] });
    assert.equal((await server.admin.withToken(reader.secret).post(`/v1/outbox/${messageId}/retry`)).status, 403);

    await relay.setMode('accept');
    const retried = await server.admin.post(`/v1/outbox/${messageId}/retry`);
    assert.equal(retried.status, 200, JSON.stringify(retried.body));
    assert.equal(retried.body.message_id, messageId);
    assert.equal(retried.body.status, 'queued');
    const sent = await waitForStatus(messageId, 'sent');
    assert.equal(sent.attempts, 2);
    assert.equal(sent.error, undefined);
    assert.deepEqual(
      (await deliveryEvents(messageId)).map((e) => e.status),
      ['queued', 'sending', 'failed', 'queued', 'sending', 'sent'],
    );
  });

  it('marks a sent message bounced when a delivery status notification for it arrives', async () => {
    const dsn = [
      'From: Mail Delivery System <MAILER-DAEMON@relay.example>',
      `To: ${mailboxAddress}`,
      'Subject: Undelivered Mail Returned to Sender',
      'Message-ID: <bounce-1@relay.example>',
      'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="b1"',
      '',
      '--b1',
      'Content-Type: text/plain',
      '',
      'Your message could not be delivered.',
      '',
      '--b1',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; relay.example',
      '',
      'Final-Recipient: rfc822; customer@example.org',
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 User unknown',
      '',
      '--b1',
      'Content-Type: text/rfc822-headers',
      '',
      `From: ${mailboxAddress}`,
      'To: customer@example.org',
      'Subject: Re: Numbers?',
      `Message-ID: ${sentMessageIdHeader}`,
      '',
      '--b1--',
      '',
    ].join('\r\n');
    // Another mailbox's report does not touch this mailbox's message.
    const elsewhere = await server.admin.raw('POST', `/v1/mailboxes/${otherMailboxId}/messages`, dsn, 'message/rfc822');
    assert.equal(elsewhere.status, 201);
    assert.equal((await deliveryOf(sentMessageId)).status, 'sent');

    const res = await server.admin.raw('POST', `/v1/mailboxes/${mailboxId}/messages`, dsn, 'message/rfc822');
    assert.equal(res.status, 201, JSON.stringify(res.body));
    // The report is stored in the same transaction, so the status has already changed.
    const bounced = await deliveryOf(sentMessageId);
    assert.equal(bounced.status, 'bounced');
    assert.match(bounced.error!, /customer@example\.org 5\.1\.1/);
    const statuses = (await deliveryEvents(sentMessageId)).map((e) => e.status);
    assert.deepEqual(statuses, ['queued', 'sending', 'sent', 'bounced']);
    // The report itself is an ordinary inbound message, with its status fields in the text.
    const report = await callOk(agent, 'get_message', { message_id: res.body.message_id });
    assert.match(report.text, /Action: failed/);
  });

  it('lists deliveries for administrators, filtered, newest first, within their mailboxes', async () => {
    const { messageId: otherMessage } = await sendApproved({ subject: 'From the other mailbox' }, otherMailboxId);
    await waitForStatus(otherMessage, 'sent');

    const all = await server.admin.get('/v1/outbox');
    assert.equal(all.status, 200);
    const deliveries = all.body.deliveries as Array<Record<string, any>>;
    assert.ok(deliveries.length >= 4);
    assert.deepEqual(
      deliveries.map((d) => d.queued_at),
      deliveries
        .map((d) => d.queued_at)
        .sort()
        .reverse(),
    );
    const entry = deliveries.find((d) => d.message_id === sentMessageId)!;
    assert.equal(entry.mailbox_id, mailboxId);
    assert.equal(entry.status, 'bounced');
    assert.equal(entry.subject, 'Re: Numbers?');
    assert.deepEqual(entry.to, ['customer@example.org']);
    assert.deepEqual(entry.cc, ['boss@example.org']);
    assert.equal(entry.from, mailboxAddress);
    assert.ok(entry.request_id.startsWith('chk_'));
    assert.equal(typeof entry.attempts, 'number');

    const bouncedOnly = (await server.admin.get('/v1/outbox?status=bounced')).body.deliveries;
    assert.deepEqual(
      bouncedOnly.map((d: { message_id: string }) => d.message_id),
      [sentMessageId],
    );
    const limited = (await server.admin.get('/v1/outbox?status=sent&limit=1')).body.deliveries;
    assert.equal(limited.length, 1);
    assert.equal(limited[0].message_id, otherMessage);

    // A mailbox-bound administrator sees only its mailbox's deliveries.
    const boundAdmin = await createToken(server.admin, { scopes: ['admin'], mailboxes: [otherMailboxId] });
    const own = (await server.admin.withToken(boundAdmin.secret).get('/v1/outbox')).body.deliveries;
    assert.deepEqual(
      own.map((d: { message_id: string }) => d.message_id),
      [otherMessage],
    );
    // Only admin tokens; bad filters are specific 400s.
    const decider = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: ['*'] });
    assert.equal((await server.admin.withToken(decider.secret).get('/v1/outbox')).status, 403);
    for (const query of ['status=lost', 'limit=0', 'limit=501', 'limit=abc', 'colour=red']) {
      const bad = await server.admin.get(`/v1/outbox?${query}`);
      assert.equal(bad.status, 400, query);
      assert.equal(bad.body.error, 'invalid_request', query);
    }
  });

  it('reports deliveries by status, the outbox depth, the oldest age and send attempts in /metrics', async () => {
    const text = await (await fetch(new URL('/metrics', server.url))).text();
    const value = (pattern: RegExp) => {
      const m = pattern.exec(text);
      assert.ok(m, `${pattern} in /metrics`);
      return Number(m[1]);
    };
    assert.ok(value(/^alcarta_outbox_deliveries\{status="sent"\} (\d+)$/m) >= 3);
    assert.equal(value(/^alcarta_outbox_deliveries\{status="bounced"\} (\d+)$/m), 1);
    assert.equal(value(/^alcarta_outbox_deliveries\{status="not_configured"\} (\d+)$/m), 0);
    assert.equal(value(/^alcarta_outbox_depth (\d+)$/m), 0);
    assert.equal(value(/^alcarta_outbox_oldest_age_seconds (\S+)$/m), 0);
    assert.ok(value(/^alcarta_outbox_send_attempts_total\{outcome="sent"\} (\d+)$/m) >= 4);
    assert.ok(value(/^alcarta_outbox_send_attempts_total\{outcome="temporary"\} (\d+)$/m) >= 2);
    assert.equal(value(/^alcarta_outbox_send_attempts_total\{outcome="permanent"\} (\d+)$/m), 1);
  });

  it('records approved mail as not_configured when no relay is set, and sends nothing', async () => {
    const plain = await startTestServer({ env: { ALCARTA_SMTP_PORT: 'off' } });
    try {
      const box = await createMailbox(plain.admin);
      const token = await createToken(plain.admin, { scopes: ['mail:send', 'mail:read'], mailboxes: [box] });
      const client = await connectMcp(plain.url, token.secret);
      try {
        const before = (await relay.received()).length;
        const { request_id: requestId } = await callOk(client, 'send_email', {
          mailbox_id: box,
          to: ['someone@example.net'],
          subject: 'Nowhere to go',
          text: 'No relay.',
        });
        const approved = await plain.admin.post(`/v1/requests/${requestId}/approve`, {});
        const messageId = approved.body.sent_message_id as string;
        const delivery = (await callOk(client, 'get_message', { message_id: messageId })).delivery;
        assert.deepEqual(delivery, { status: 'not_configured', attempts: 0 });
        const listed = (await plain.admin.get('/v1/outbox')).body.deliveries;
        assert.deepEqual(
          listed.map((d: Delivery & { message_id: string }) => [d.message_id, d.status]),
          [[messageId, 'not_configured']],
        );
        const retry = await plain.admin.post(`/v1/outbox/${messageId}/retry`);
        assert.equal(retry.status, 409);
        assert.equal((await relay.received()).length, before);
        const events = await plain.db.query<{ payload: { status: string } }>(
          `SELECT payload FROM events WHERE type = 'message_delivery_changed' AND message_id = $1`,
          [messageId],
        );
        assert.deepEqual(
          events.map((e) => e.payload.status),
          ['not_configured'],
        );
      } finally {
        await client.close();
      }
    } finally {
      await plain.close();
    }
  });
});
