import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { createTransport } from 'nodemailer';
import { composeOutboundMail, domainOf, OutboundMessageFields } from '#app/outbox/outbound-mail.js';
import { classifyFailure, relayTransportOptions } from '#app/outbox/smtp-relay.js';

const reply: OutboundMessageFields = {
  from: 'agent@agents.example',
  to: ['customer@example.org'],
  cc: ['boss@example.org'],
  subject: 'Re: Numbers?',
  text: 'Here they are.',
  html: '<p>Here they are.</p>',
  messageIdHeader: '<msg_1@agents.example>',
  inReplyTo: '<question@example.org>',
  references: ['<root@example.org>', '<question@example.org>'],
  receivedAt: new Date('2026-12-02T10:00:00Z'),
};

/** The message nodemailer builds from the options (its stream transport: no network). */
async function build(options: ReturnType<typeof composeOutboundMail>) {
  const info = await createTransport({ streamTransport: true, buffer: true }).sendMail(options);
  return { raw: info.message as Buffer, envelope: info.envelope };
}

describe('composing outbound mail', () => {
  it('carries From, To, Cc, Subject, Date and the stored Message-ID, and the envelope of all recipients', async () => {
    const { raw, envelope } = await build(composeOutboundMail(reply));
    const parsed = await simpleParser(raw);
    assert.equal(parsed.from?.text, 'agent@agents.example');
    assert.equal(parsed.subject, 'Re: Numbers?');
    assert.equal(parsed.date?.toISOString(), '2026-12-02T10:00:00.000Z');
    assert.equal(parsed.messageId, '<msg_1@agents.example>');
    assert.equal(parsed.text?.trim(), 'Here they are.');
    assert.equal(typeof parsed.html, 'string');
    assert.deepEqual(envelope, { from: 'agent@agents.example', to: ['customer@example.org', 'boss@example.org'] });
    assert.doesNotMatch(raw.toString('latin1'), /^X-Mailer:/im);
  });

  it('continues the thread: In-Reply-To the parent, References the chain', async () => {
    const parsed = await simpleParser((await build(composeOutboundMail(reply))).raw);
    assert.equal(parsed.inReplyTo, '<question@example.org>');
    assert.deepEqual(parsed.references, ['<root@example.org>', '<question@example.org>']);
  });

  it('leaves threading headers and Cc out of a new message', async () => {
    const fresh = { ...reply, cc: [], html: null, inReplyTo: null, references: [] };
    const { raw } = await build(composeOutboundMail(fresh));
    const head = raw.toString('latin1').split('\r\n\r\n')[0];
    assert.doesNotMatch(head, /^(In-Reply-To|References|Cc):/im);
  });

  it('is the same message on every attempt', () => {
    const first = composeOutboundMail(reply);
    const second = composeOutboundMail(reply);
    assert.deepEqual(first, second);
  });

  it('signs with DKIM for the mailbox domain when a key is configured', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const options = composeOutboundMail(reply, { selector: 'sel1', privateKey: pem });
    assert.deepEqual(options.dkim, { domainName: 'agents.example', keySelector: 'sel1', privateKey: pem });
    const head = (await build(options)).raw
      .toString('latin1')
      .split('\r\n\r\n')[0]
      .replace(/\r\n[ \t]+/g, ' ');
    const signature = /^DKIM-Signature: (.*)$/im.exec(head)?.[1];
    assert.ok(signature, 'a DKIM-Signature header');
    assert.match(signature, /\bd=agents\.example;/);
    assert.match(signature, /\bs=sel1;/);
    assert.equal(composeOutboundMail(reply).dkim, undefined);
  });

  it('finds the domain of an address', () => {
    assert.equal(domainOf('a@B.Example'), 'b.example');
    assert.equal(domainOf('"a@b"@c.example'), 'c.example');
  });
});

describe('the outbound relay', () => {
  it('uses STARTTLS for smtp:// (port 587 by default) and TLS for smtps:// (465)', () => {
    const plain = relayTransportOptions('smtp://us%40er:p%3Ass@relay.example', 5000, 'me.example');
    assert.equal(plain.secure, false);
    assert.equal(plain.port, 587);
    assert.equal(plain.host, 'relay.example');
    assert.deepEqual(plain.auth, { user: 'us@er', pass: 'p:ss' });
    assert.equal(plain.name, 'me.example');
    const tls = relayTransportOptions('smtps://relay.example', 5000, 'me.example');
    assert.equal(tls.secure, true);
    assert.equal(tls.port, 465);
    assert.equal(tls.auth, undefined);
    assert.equal(relayTransportOptions('smtp://[::1]:2525', 5000, 'me').host, '::1');
    assert.equal(relayTransportOptions('smtp://[::1]:2525', 5000, 'me').port, 2525);
    assert.equal(plain.socketTimeout, 5000);
  });

  it('treats 5xx answers as permanent and everything else as temporary', () => {
    assert.equal(
      classifyFailure(Object.assign(new Error('550 5.1.1 unknown'), { responseCode: 550 }), 1000).kind,
      'permanent',
    );
    assert.equal(
      classifyFailure(Object.assign(new Error('451 4.3.0 later'), { responseCode: 451 }), 1000).kind,
      'temporary',
    );
    assert.equal(
      classifyFailure(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ESOCKET' }), 1000).kind,
      'temporary',
    );
    assert.deepEqual(classifyFailure(Object.assign(new Error('Message sending aborted'), { code: 'EABORT' }), 30_000), {
      kind: 'temporary',
      error: 'the delivery attempt timed out after 30 s',
    });
  });
});
