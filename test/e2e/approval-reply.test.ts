import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { simpleParser } from 'mailparser';
import { dovecotAccount, imapSource, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { dkimKey, dkimSigned } from '../support/dkim';
import { dnsZone } from '../support/dns-zone';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { swaksExact } from '../support/smtp';
import { TestSmtpRelay } from '../support/smtp-relay';
import { requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** Long enough for any wake-up on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 50;
const SELECTOR = 's1';
const KEY = dkimKey();

interface RelayedMail {
  to: string[];
  subject: string;
  text: string;
  messageId: string;
  inReplyTo: string | undefined;
  autoSubmitted: string | undefined;
}

/**
 * Deciding by reply (docs/policies.md, "Deciding by reply") with real mail both ways: the approval mail
 * reaches a real relay (aiosmtpd) with Alcarta's own Message-ID; the approver's reply, DKIM-signed
 * for its domain (mailauth, DNS from a table), comes back into Alcarta's SMTP, sent by Debian's
 * swaks byte for byte, with In-Reply-To naming it, and decides as the approver, waking the agent's
 * monitor_approval. Unsigned, foreign, unclear and late replies decide nothing, and each gets one
 * answer at the relay saying why; an automatic reply gets none.
 */
const MISSING = requireSystemPackage('python3-aiosmtpd') ?? requireSystemPackage('swaks');

describe('deciding by reply', { skip: MISSING }, () => {
  let relay: TestSmtpRelay;
  let server: TestServer;
  let agent: Client;
  let mailboxId: string;
  const mailboxAddress = `replies-${process.pid}@example.com`;
  const alice = 'alice@approvers.example';
  const bob = 'bob@approvers.example';
  // SPF permits no local client: only the DKIM signature can verify these senders.
  const zone = dnsZone({
    'approvers.example': { TXT: ['v=spf1 ip4:192.0.2.1 -all'] },
    '_dmarc.approvers.example': { TXT: ['v=DMARC1; p=reject'] },
    [`${SELECTOR}._domainkey.approvers.example`]: { TXT: [KEY.record] },
    'other.example': { TXT: ['v=spf1 ip4:192.0.2.1 -all'] },
    '_dmarc.other.example': { TXT: ['v=DMARC1; p=reject'] },
    [`${SELECTOR}._domainkey.other.example`]: { TXT: [KEY.record] },
  });

  const relayed = async (): Promise<RelayedMail[]> =>
    Promise.all(
      (await relay.received()).map(async (received) => {
        const parsed = await simpleParser(received.raw);
        const auto = parsed.headers.get('auto-submitted');
        return {
          to: received.rcptTos,
          subject: parsed.subject ?? '',
          text: parsed.text ?? '',
          messageId: parsed.messageId ?? '',
          inReplyTo: parsed.inReplyTo,
          autoSubmitted: typeof auto === 'string' ? auto : undefined,
        };
      }),
    );
  const relayedWhere = (what: string, match: (m: RelayedMail) => boolean) =>
    waitFor(what, async () => (await relayed()).find(match), { timeoutMs: 20_000, intervalMs: 50 });
  const approvalMail = (requestId: string, approver: string) =>
    relayedWhere(
      `the approval mail of ${requestId} to ${approver}`,
      (m) => m.to.includes(approver) && m.text.includes(requestId),
    );

  /** A reply to `mail` from `from` saying `body`, DKIM-signed for the sender's domain when `signed`. */
  const composeReply = async (
    from: string,
    to: string,
    mail: RelayedMail,
    body: string,
    options: { signed: boolean; headers?: string[] },
  ) => {
    const domain = from.split('@')[1];
    const messageId = `<${randomUUID()}@${domain}>`;
    const raw = [
      `From: ${from}`,
      `To: ${to}`,
      `Subject: Re: ${mail.subject}`,
      `Message-ID: ${messageId}`,
      `In-Reply-To: ${mail.messageId}`,
      `References: ${mail.messageId}`,
      `Date: ${new Date().toUTCString()}`,
      ...(options.headers ?? []),
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      ...body.split('\n'),
      '',
    ].join('\r\n');
    const message = options.signed
      ? await dkimSigned(raw, { domain, selector: SELECTOR, privateKey: KEY.privateKey })
      : raw;
    return { messageId, message };
  };
  /** Sends `message` with swaks (byte for byte, so its signature holds) into the SMTP server at `port`. */
  const sendWithSwaks = async (port: number, message: string, envelope: { from: string; to: string }) => {
    const sent = await swaksExact(port, message, envelope);
    assert.equal(sent.code, 0, sent.transcript);
    const data = sent.replies.findIndex((line) => line.startsWith('354'));
    assert.match(sent.replies[data + 1] ?? '', /^250 /, `DATA accepted:\n${sent.transcript}`);
  };
  /** The reply (see composeReply), sent by swaks into Alcarta's SMTP; answers its Message-ID. */
  const reply = async (
    from: string,
    mail: RelayedMail,
    body: string,
    options: { signed: boolean; headers?: string[] },
  ) => {
    const { messageId, message } = await composeReply(from, mailboxAddress, mail, body, options);
    await sendWithSwaks(server.running.smtpPort!, message, { from, to: mailboxAddress });
    return messageId;
  };
  const answerTo = (replyId: string) => relayedWhere(`the answer to ${replyId}`, (m) => m.inReplyTo === replyId);
  const quoted = (mail: RelayedMail) =>
    mail.text
      .split('\n')
      .map((line) => `> ${line}`)
      .join('\n');
  const newRequest = async (title: string) =>
    (await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title })).request_id as string;
  const requestState = (requestId: string) => callOk(agent, 'get_request', { request_id: requestId });

  before(async () => {
    relay = await TestSmtpRelay.start();
    server = await startTestServer({
      dnsResolver: zone,
      env: {
        ALCARTA_SMTP_PORT: '0',
        ALCARTA_SMTP_RELAY_URL: relay.url,
        ALCARTA_SMTP_RETRY_BASE_SECONDS: '1',
        ALCARTA_SECRETS_KEY: secretsKey(),
      },
    });
    mailboxId = await createMailbox(server.admin, mailboxAddress);
    const token = await createToken(server.admin, {
      name: 'Release bot',
      scopes: ['approvals:read', 'mail:read'],
      mailboxes: [mailboxId],
    });
    agent = await connectMcp(server.url, token.secret);
    const set = await server.admin.request('PUT', `/v1/mailboxes/${mailboxId}/approvers`, { emails: [alice, bob] });
    assert.equal(set.status, 200, JSON.stringify(set.body));
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    await relay?.stop();
  });

  let approved: { requestId: string; bobsMail: RelayedMail };

  it('a signed reply "Approve" from the approver decides as the approver, with its reason, and wakes the agent', async () => {
    const requestId = await newRequest('Ship release 5.0');
    const waiting = callOk(agent, 'monitor_approval', { request_id: requestId, timeout_seconds: BLOCK });
    await waitFor('the parked monitor_approval', async () => (await activeWaits(server.url, 'request')) === 1);
    const mail = await approvalMail(requestId, alice);
    assert.match(
      mail.messageId,
      /^<[A-Za-z0-9]{24}@example\.com>$/,
      'a Message-ID of Alcarta’s own, at the mailbox’s domain',
    );
    assert.match(mail.text, /reply to this mail with "approve" or "reject" as the first word/);
    const bobsMail = await approvalMail(requestId, bob);
    assert.notEqual(bobsMail.messageId, mail.messageId, 'each approval mail has its own Message-ID');

    const body = `Approve\n\nLooks fine\n\nOn Friday Releases wrote:\n${quoted(mail)}`;
    const alicesReply = await composeReply(alice, mailboxAddress, mail, body, { signed: true });
    // The same file through swaks to the relay, which keeps DATA as it came: swaks changes no byte.
    const copyTo = `copy-${process.pid}@relay.example`;
    await sendWithSwaks(relay.port, alicesReply.message, { from: alice, to: copyTo });
    const copy = await waitFor('the copy at the relay', async () =>
      (await relay.received()).find((m) => m.rcptTos.includes(copyTo)),
    );
    assert.equal(copy.raw.toString('utf8'), alicesReply.message, 'swaks sends the signed reply byte for byte');
    await sendWithSwaks(server.running.smtpPort!, alicesReply.message, { from: alice, to: mailboxAddress });
    const woken = await waiting;
    assert.equal(woken.matched, true);
    assert.deepEqual(woken.requests, [{ request_id: requestId, state: 'approved' }]);
    const stored = await requestState(requestId);
    assert.equal(stored.decided_by, alice);
    assert.equal(stored.reason, 'Looks fine');
    approved = { requestId, bobsMail };
  });

  it('unsigned, foreign, unclear and late replies decide nothing, and each is answered once saying why', async () => {
    const requestId = await newRequest('Ship release 5.1');
    const mail = await approvalMail(requestId, alice);

    const unsigned = await reply(alice, mail, 'Approve', { signed: false });
    const foreign = await reply('mallory@other.example', mail, 'Approve', { signed: true });
    const automatic = await reply(alice, mail, 'Approve', { signed: true, headers: ['Auto-Submitted: auto-replied'] });
    const unclear = await reply(alice, mail, 'Yes, fine by me', { signed: true });
    const late = await reply(bob, approved.bobsMail, 'Reject: too late?', { signed: true });

    const answers = {
      unsigned: await answerTo(unsigned),
      foreign: await answerTo(foreign),
      unclear: await answerTo(unclear),
      late: await answerTo(late),
    };
    assert.deepEqual(answers.unsigned.to, [alice]);
    assert.match(
      answers.unsigned.text,
      /decided nothing: it could not be verified as coming from alice@approvers\.example/,
    );
    assert.deepEqual(answers.foreign.to, ['mallory@other.example']);
    assert.match(answers.foreign.text, /decided nothing: the approval mail was sent to another address/);
    assert.doesNotMatch(answers.foreign.text, /alice@/, 'the answer does not say who the approver is');
    assert.match(answers.unclear.text, /decided nothing: its first word must be "approve" or "reject"/);
    assert.deepEqual(answers.late.to, [bob]);
    assert.match(answers.late.text, /decided nothing: the request was already approved by alice@approvers\.example\./);
    for (const answer of Object.values(answers)) {
      assert.match(answer.subject, /^Re: Approval needed: Ship release 5\.[01]$/);
      assert.equal(answer.autoSubmitted, 'auto-replied');
    }

    // The automatic reply came before the unclear one, whose answer is out: it was never answered.
    const all = await relayed();
    assert.equal(all.filter((m) => m.inReplyTo === automatic).length, 0, 'no answer to an automatic reply');
    for (const id of [unsigned, foreign, unclear, late]) {
      assert.equal(all.filter((m) => m.inReplyTo === id).length, 1, `one answer to ${id}`);
    }
    assert.equal((await requestState(requestId)).state, 'pending');
    const late1 = await requestState(approved.requestId);
    assert.equal(late1.state, 'approved');
    assert.equal(late1.decided_by, alice);

    // The approver's own signed reply still decides: "reject" and its reason.
    await reply(alice, mail, '\n  reject. Not before the freeze ends\n-- \nAlice', { signed: true });
    await waitFor(
      'the rejection',
      async () => ((await requestState(requestId)).state === 'rejected' ? true : undefined),
      { timeoutMs: 20_000 },
    );
    const rejected = await requestState(requestId);
    assert.equal(rejected.decided_by, alice);
    assert.equal(rejected.reason, 'Not before the freeze ends');
  });

  /**
   * The same reply arriving through a connected mailbox (docs/connected-mailboxes.md): the approver's
   * signed reply lands in the Dovecot account's INBOX (APPENDed by a second IMAP client), the sync
   * ingests it, and Alcarta verifies its DKIM signature itself (no trusted_authserv_ids; DMARC by
   * the aligned signature, SPF not evaluated) before it decides.
   */
  describe('through a connected mailbox', { skip: requireSystemPackage('dovecot-imapd') }, () => {
    let dovecot: TestDovecot;
    let imapAgent: Client;
    let account: { username: string; password: string };
    let imapMailboxId: string;

    before(async () => {
      dovecot = await startDovecot();
      account = await dovecotAccount(dovecot);
      const created = await server.admin.post('/v1/mailboxes', {
        address: account.username,
        source: imapSource(dovecot, account),
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.deepEqual(created.body.source.trusted_authserv_ids, [], 'Alcarta verifies the sender itself');
      imapMailboxId = created.body.mailbox_id as string;
      await sourceReaches(server.admin, imapMailboxId, 'idle');
      const set = await server.admin.request('PUT', `/v1/mailboxes/${imapMailboxId}/approvers`, { emails: [alice] });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      const token = await createToken(server.admin, {
        name: 'Inbox bot',
        scopes: ['approvals:read', 'mail:read'],
        mailboxes: [imapMailboxId],
      });
      imapAgent = await connectMcp(server.url, token.secret);
    });

    after(async () => {
      await imapAgent?.close();
      await dovecot?.close();
    });

    it('a signed reply synced from the account decides as the approver and wakes the agent', async () => {
      const requestId = (
        await callOk(imapAgent, 'request_approval', { mailbox_id: imapMailboxId, title: 'Rotate the keys' })
      ).request_id as string;
      const waiting = callOk(imapAgent, 'monitor_approval', { request_id: requestId, timeout_seconds: BLOCK });
      await waitFor('the parked monitor_approval', async () => (await activeWaits(server.url, 'request')) === 1);
      const mail = await approvalMail(requestId, alice);
      const domain = account.username.split('@')[1].replace(/\./g, '\\.');
      assert.match(mail.messageId, new RegExp(`^<[A-Za-z0-9]{24}@${domain}>$`), 'at the mailbox’s domain');

      const { message } = await composeReply(alice, account.username, mail, 'Approve. Keys are due', {
        signed: true,
      });
      await dovecot.append(account.username, 'INBOX', message);
      const woken = await waiting;
      assert.equal(woken.matched, true, JSON.stringify(woken));
      assert.deepEqual(woken.requests, [{ request_id: requestId, state: 'approved' }]);
      const stored = await callOk(imapAgent, 'get_request', { request_id: requestId });
      assert.equal(stored.decided_by, alice);
      assert.equal(stored.reason, 'Keys are due');
    });
  });
});
