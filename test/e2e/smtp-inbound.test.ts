import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createTransport } from 'nodemailer';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { metricValue, RawSmtp, repliesWith, swaks } from '../support/smtp';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

/** The size limit of this server: small, so that oversize tests are cheap. */
const MAX_BYTES = 256 * 1024;

interface Listed {
  message_id: string;
  from: string;
  subject: string;
}

/**
 * docs/mail.md inbound SMTP with real clients (Debian's swaks, nodemailer): delivery read back over
 * MCP, waits woken by SMTP mail, recipients (plus-addressing, case, several, unknown), SIZE/552,
 * one ingest path with REST (idempotent on Message-ID), and hostile input that must get a proper
 * SMTP reply with nothing half-stored.
 */
describe('inbound SMTP', { skip: requireSystemPackage('swaks') }, () => {
  let server: TestServer;
  let smtpPort: number;
  let agent: Client;
  let dir: string;
  let counter = 0;
  /** A fresh mailbox and its address. */
  const mailbox = async () => {
    const address = `smtp-${process.pid}-${++counter}-${randomBytes(3).toString('hex')}@example.com`;
    return { id: await createMailbox(server.admin, address), address };
  };
  const listed = async (mailboxId: string): Promise<Listed[]> =>
    (await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 100 })).messages as Listed[];
  const metric = (reason: string, outcome = 'refused') =>
    metricValue(server.url, 'alcarta_smtp_messages_total', { outcome, reason });

  before(async () => {
    server = await startTestServer({
      env: { ALCARTA_SMTP_PORT: '0', ALCARTA_MAX_INGEST_BYTES: String(MAX_BYTES), ALCARTA_SMTP_HOSTNAME: 'mx.test' },
    });
    smtpPort = server.running.smtpPort!;
    assert.ok(smtpPort > 0, 'an ephemeral SMTP port');
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
    agent = await connectMcp(server.url, token.secret);
    dir = await mkdtemp(join(tmpdir(), 'alcarta-smtp-'));
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('advertises SIZE and enhanced status codes, but neither STARTTLS nor AUTH without TLS and AUTH settings', async () => {
    const result = await swaks(smtpPort, ['--quit-after', 'EHLO']);
    const ehlo = result.replies.join('\n');
    assert.match(ehlo, /^220 mx\.test ESMTP Alcarta$/m, 'the greeting names ALCARTA_SMTP_HOSTNAME');
    assert.match(ehlo, new RegExp(`^250[ -]SIZE ${MAX_BYTES}$`, 'm'));
    assert.match(ehlo, /ENHANCEDSTATUSCODES/);
    assert.doesNotMatch(ehlo, /STARTTLS/);
    assert.doesNotMatch(ehlo, /AUTH/);
  });

  it('delivers a swaks message that wakes a blocked email_await and reads back over MCP', async () => {
    const box = await mailbox();
    const wait = callOk(agent, 'email_await', {
      event: { type: 'message_received', mailbox_id: box.id },
      timeout_seconds: 50,
    });
    await waitFor('the wait to park', async () => (await activeWaits(server.url, 'message')) === 1);
    const sent = await swaks(smtpPort, [
      '--from',
      'alice@sender.test',
      '--to',
      box.address,
      '--header',
      'Subject: Quarterly report',
      '--body',
      'Numbers attached.',
    ]);
    assert.equal(sent.code, 0, sent.transcript);
    assert.match(sent.replies.at(-2) ?? '', /^250 2\.6\.0 Accepted: stored in 1 mailbox$/, sent.transcript);
    const woken = await wait;
    assert.equal(woken.matched, true);
    assert.equal(woken.events.length, 1);
    assert.equal(woken.events[0].subject, 'Quarterly report');
    const messages = await listed(box.id);
    assert.deepEqual(
      messages.map((m) => [m.message_id, m.from, m.subject]),
      [[woken.events[0].message_id, 'alice@sender.test', 'Quarterly report']],
    );
    const detail = await callOk(agent, 'get_message', { message_id: messages[0].message_id });
    assert.equal(detail.text.trim(), 'Numbers attached.');
    assert.deepEqual(detail.to, [box.address]);
    assert.match(detail.message_id_header, /^<.+>$/, 'swaks sends a Message-Id');
    assert.ok((await metric('stored', 'accepted')) >= 1);
  });

  it('delivers a message sent with nodemailer (SIZE declared, multipart, cc)', async () => {
    const box = await mailbox();
    const other = await mailbox();
    const transport = createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true });
    try {
      const info = await transport.sendMail({
        from: '"Bob Sender" <bob@sender.test>',
        to: box.address,
        cc: other.address,
        subject: 'Grüße per SMTP',
        text: 'plain part',
        html: '<p>html part</p>',
        messageId: `<nodemailer-${randomBytes(4).toString('hex')}@sender.test>`,
      });
      assert.deepEqual(info.accepted.sort(), [box.address, other.address].sort());
      assert.match(info.response, /^250 2\.6\.0 Accepted: stored in 2 mailboxes/);
    } finally {
      transport.close();
    }
    for (const id of [box.id, other.id]) {
      const [message] = await listed(id);
      const detail = await callOk(agent, 'get_message', { message_id: message.message_id });
      assert.equal(detail.subject, 'Grüße per SMTP');
      assert.equal(detail.from, 'bob@sender.test');
      assert.equal(detail.text.trim(), 'plain part');
      assert.equal(detail.html, '<p>html part</p>');
      assert.deepEqual(detail.cc, [other.address]);
    }
  });

  it('delivers local+tag@domain and upper-case addresses to the mailbox', async () => {
    const box = await mailbox();
    const [local, domain] = box.address.split('@');
    for (const to of [`${local}+invoices@${domain}`, box.address.toUpperCase(), `${local.toUpperCase()}+X@${domain}`]) {
      const sent = await swaks(smtpPort, ['--from', 'a@sender.test', '--to', to, '--header', `Subject: to ${to}`]);
      assert.equal(sent.code, 0, sent.transcript);
    }
    assert.equal((await listed(box.id)).length, 3);
  });

  it('stores a message for two mailboxes in each and refuses the unknown third recipient with 550 5.1.1', async () => {
    const [a, b] = [await mailbox(), await mailbox()];
    const before = await metric('unknown_recipient');
    const sent = await swaks(smtpPort, [
      '--from',
      'c@sender.test',
      '--to',
      `${a.address},nobody-${randomBytes(3).toString('hex')}@example.com,${b.address}`,
      '--header',
      'Subject: for two',
    ]);
    assert.equal(sent.code, 0, sent.transcript);
    assert.equal(repliesWith(sent, '550').length, 1, sent.transcript);
    assert.match(repliesWith(sent, '550')[0], /^550 5\.1\.1 No mailbox here for </);
    assert.match(sent.replies.at(-2) ?? '', /stored in 2 mailboxes/);
    assert.equal((await listed(a.id)).length, 1);
    assert.equal((await listed(b.id)).length, 1);
    assert.equal(await metric('unknown_recipient'), before + 1);
  });

  it('refuses a message with no valid recipient: 550 5.1.1 at RCPT, DATA refused, nothing stored', async () => {
    const sent = await swaks(smtpPort, ['--from', 'd@sender.test', '--to', 'ghost@example.com']);
    assert.notEqual(sent.code, 0);
    assert.match(repliesWith(sent, '550')[0] ?? '', /^550 5\.1\.1 /, sent.transcript);
    const smtp = await RawSmtp.open(smtpPort);
    await smtp.reply();
    assert.match(await smtp.command('EHLO client.test'), /^250 /);
    assert.match(await smtp.command('MAIL FROM:<d@sender.test>'), /^250 /);
    assert.match(await smtp.command('RCPT TO:<ghost@example.com>'), /^550 5\.1\.1 /);
    assert.match(await smtp.command('DATA'), /^503 5\.5\.1 /);
    assert.match(await smtp.command('QUIT'), /^221 /);
    smtp.destroy();
  });

  it('refuses messages over ALCARTA_MAX_INGEST_BYTES with 552, stores nothing, and stays healthy', async () => {
    const box = await mailbox();
    const before = await metric('too_large');
    // Declared size (nodemailer sends SIZE=): refused at MAIL FROM.
    const transport = createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true });
    try {
      await assert.rejects(
        transport.sendMail({ from: 'e@sender.test', to: box.address, text: 'x'.repeat(MAX_BYTES + 1024) }),
        (err: { responseCode?: number; response?: string }) => err.responseCode === 552,
      );
    } finally {
      transport.close();
    }
    // Undeclared: swaks streams a 25 MiB attachment, refused after DATA.
    const attachment = join(dir, 'big.bin');
    await writeFile(attachment, randomBytes(25 * 1024 * 1024));
    const sent = await swaks(
      smtpPort,
      [
        '--from',
        'e@sender.test',
        '--to',
        box.address,
        '--attach',
        attachment,
        '--suppress-data',
        // swaks encodes the 25 MiB in Perl: minutes, not seconds, on a busy 2-core machine.
      ],
      { timeoutMs: 300_000 },
    );
    assert.notEqual(sent.code, 0);
    assert.match(repliesWith(sent, '552').at(-1) ?? '', /^552 5\.3\.4 /, sent.transcript);
    assert.equal((await listed(box.id)).length, 0);
    assert.ok((await metric('too_large')) >= before + 1);
    const ok = await swaks(smtpPort, ['--from', 'e@sender.test', '--to', box.address]);
    assert.equal(ok.code, 0, ok.transcript);
    assert.equal((await listed(box.id)).length, 1);
    assert.equal((await fetch(`${server.url}/health/ready`)).status, 200);
  });

  it('stores the same Message-ID once per mailbox, whether it comes by SMTP or REST raw ingest', async () => {
    const box = await mailbox();
    const messageId = `<dup-${randomBytes(4).toString('hex')}@sender.test>`;
    const args = ['--from', 'f@sender.test', '--to', box.address, '--header', `Message-Id: ${messageId}`];
    const first = await swaks(smtpPort, args);
    const second = await swaks(smtpPort, args);
    assert.equal(first.code, 0);
    assert.equal(second.code, 0, 'a duplicate is accepted (250), not bounced');
    assert.match(second.replies.at(-2) ?? '', /already stored/);
    const ingestToken = await createToken(server.admin, { scopes: ['mail:ingest'], mailboxes: [box.id] });
    const res = await fetch(`${server.url}/v1/mailboxes/${box.id}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ingestToken.secret}`, 'content-type': 'message/rfc822' },
      body: `From: f@sender.test\r\nTo: ${box.address}\r\nMessage-ID: ${messageId}\r\nSubject: again\r\n\r\nbody\r\n`,
    });
    assert.ok(res.status === 200 || res.status === 201, `REST ingest: ${res.status}`);
    assert.equal((await listed(box.id)).length, 1);
  });

  it('stores concurrent deliveries into one mailbox, and concurrent duplicates once', async () => {
    const box = await mailbox();
    const transport = createTransport({
      pool: true,
      maxConnections: 6,
      host: '127.0.0.1',
      port: smtpPort,
      secure: false,
      ignoreTLS: true,
    });
    const messageId = `<burst-dup-${randomBytes(4).toString('hex')}@sender.test>`;
    try {
      const sends = [
        ...Array.from({ length: 30 }, (_, i) =>
          transport.sendMail({ from: 'g@sender.test', to: box.address, subject: `burst ${i}`, text: 'x' }),
        ),
        ...Array.from({ length: 6 }, () =>
          transport.sendMail({ from: 'g@sender.test', to: box.address, subject: 'dup', text: 'x', messageId }),
        ),
      ];
      const results = await Promise.all(sends);
      assert.ok(results.every((r) => r.response.startsWith('250 ')));
    } finally {
      transport.close();
    }
    const messages = await listed(box.id);
    assert.equal(messages.length, 31);
    assert.equal(messages.filter((m) => m.subject === 'dup').length, 1);
    assert.equal(new Set(messages.map((m) => m.message_id)).size, 31);
  });

  describe('hostile input: a proper reply, never a crash, nothing half-stored', () => {
    /** Sends `data` (the message, CRLF lines, without the final dot) over a raw session. */
    const sendRaw = async (to: string, data: string | Buffer) => {
      const smtp = await RawSmtp.open(smtpPort);
      await smtp.reply();
      await smtp.command('EHLO client.test');
      await smtp.command('MAIL FROM:<h@sender.test>');
      assert.match(await smtp.command(`RCPT TO:<${to}>`), /^250 /);
      assert.match(await smtp.command('DATA'), /^354 /);
      smtp.write(data);
      const reply = await smtp.command('\r\n.');
      await smtp.command('QUIT').catch(() => undefined);
      smtp.destroy();
      return reply;
    };

    it('malformed MIME is stored as far as it parses', async () => {
      const box = await mailbox();
      const reply = await sendRaw(
        box.address,
        'From: h@sender.test\r\nSubject: broken\r\nContent-Type: multipart/mixed; boundary="zzz"\r\n\r\n' +
          '--zzz\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64\r\n--zz',
      );
      assert.match(reply, /^250 /);
      assert.equal((await listed(box.id))[0].subject, 'broken');
    });

    it('8-bit headers and NUL bytes', async () => {
      const box = await mailbox();
      const data = Buffer.concat([
        Buffer.from('From: h@sender.test\r\nSubject: caf', 'latin1'),
        Buffer.from([0xe9, 0x20, 0xff, 0x00, 0x41]),
        Buffer.from('\r\nX-Odd: \u0000\r\n\r\nbody with NUL \u0000 byte\r\n', 'latin1'),
      ]);
      assert.match(await sendRaw(box.address, data), /^250 /);
      const [message] = await listed(box.id);
      const detail = await callOk(agent, 'get_message', { message_id: message.message_id });
      assert.ok(!detail.text.includes('\u0000') && !detail.subject.includes('\u0000'));
    });

    it('huge headers (within the size limit)', async () => {
      const box = await mailbox();
      const many = Array.from({ length: 2000 }, (_, i) => `X-Filler-${i}: ${'v'.repeat(60)}`).join('\r\n');
      const reply = await sendRaw(
        box.address,
        `From: h@sender.test\r\nSubject: ${'s'.repeat(50_000)}\r\n${many}\r\n\r\nbody\r\n`,
      );
      assert.match(reply, /^250 /);
      assert.equal((await listed(box.id)).length, 1);
    });

    it('no From address: 554 5.6.0 with the reason, nothing stored', async () => {
      const box = await mailbox();
      const before = await metric('unparseable');
      const reply = await sendRaw(box.address, 'Subject: anonymous\r\n\r\nwho sent this?\r\n');
      assert.match(reply, /^554 5\.6\.0 Message refused: The message has no From address\.$/);
      assert.equal((await listed(box.id)).length, 0);
      assert.equal(await metric('unparseable'), before + 1);
    });

    it('pipelining abuse: a flood of commands in one write gets a reply each, in order', async () => {
      const box = await mailbox();
      const smtp = await RawSmtp.open(smtpPort);
      await smtp.reply();
      const commands = ['EHLO flood.test'];
      for (let i = 0; i < 50; i++) commands.push('NOOP', 'RSET');
      commands.push('MAIL FROM:<p@sender.test>', `RCPT TO:<${box.address}>`, 'RCPT TO:<nobody@example.com>', 'DATA');
      smtp.write(
        commands.map((c) => `${c}\r\n`).join('') + 'From: p@sender.test\r\nSubject: piped\r\n\r\nx\r\n.\r\nQUIT\r\n',
      );
      const replies: string[] = [];
      for (let i = 0; i < commands.length + 2; i++) replies.push(await smtp.reply());
      assert.match(replies[0], /^250 /);
      assert.ok(replies.slice(1, 101).every((r) => r.startsWith('250 ')));
      assert.deepEqual(
        replies.slice(101).map((r) => r.slice(0, 3)),
        ['250', '250', '550', '354', '250', '221'],
      );
      smtp.destroy();
      assert.equal((await listed(box.id))[0]?.subject, 'piped');
    });

    it('a client that disconnects in the middle of DATA stores nothing, and the server serves the next', async () => {
      const box = await mailbox();
      const sessionsBefore = await metricValue(server.url, 'alcarta_smtp_sessions_active');
      const smtp = await RawSmtp.open(smtpPort);
      await smtp.reply();
      await smtp.command('EHLO client.test');
      await smtp.command('MAIL FROM:<q@sender.test>');
      await smtp.command(`RCPT TO:<${box.address}>`);
      assert.match(await smtp.command('DATA'), /^354 /);
      smtp.write(`From: q@sender.test\r\nSubject: cut\r\n\r\n${'partial line\r\n'.repeat(1000)}`);
      smtp.destroy();
      await waitFor(
        'the session to end',
        async () => (await metricValue(server.url, 'alcarta_smtp_sessions_active')) === sessionsBefore,
      );
      assert.equal((await listed(box.id)).length, 0);
      const ok = await swaks(smtpPort, ['--from', 'q@sender.test', '--to', box.address, '--header', 'Subject: whole']);
      assert.equal(ok.code, 0, ok.transcript);
      assert.deepEqual(
        (await listed(box.id)).map((m) => m.subject),
        ['whole'],
      );
    });
  });

  it('counts sessions', async () => {
    assert.ok((await metricValue(server.url, 'alcarta_smtp_sessions_total')) >= 10);
    await waitFor(
      'idle sessions to close',
      async () => (await metricValue(server.url, 'alcarta_smtp_sessions_active')) === 0,
    );
  });
});
