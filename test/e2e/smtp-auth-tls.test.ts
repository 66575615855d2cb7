import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createTransport } from 'nodemailer';
import { callOk, connectMcp } from '../support/mcp';
import { metricValue, RawSmtp, repliesWith, swaks } from '../support/smtp';
import { testCertificate } from '../support/tls-certificates';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

/**
 * docs/mail.md STARTTLS (ALCARTA_SMTP_TLS_CERT_FILE/KEY_FILE) and ALCARTA_SMTP_AUTH=required: a
 * client must AUTH with a mail:ingest token as the password, after STARTTLS; a token bound to
 * mailboxes delivers only to those.
 */
const MAX_CLIENTS = 3;

describe(
  'inbound SMTP with STARTTLS and AUTH required',
  { skip: requireSystemPackage('swaks') ?? requireSystemPackage('openssl') },
  () => {
    let server: TestServer;
    let port: number;
    let agent: Client;
    let cert: Awaited<ReturnType<typeof testCertificate>>;
    let boxA: { id: string; address: string };
    let boxB: { id: string; address: string };
    let ingestAll: string;
    let ingestA: string;
    let readOnly: string;

    const newBox = async () => {
      const address = `tls-${randomBytes(4).toString('hex')}@example.com`;
      return { id: await createMailbox(server.admin, address), address };
    };
    const count = async (mailboxId: string) =>
      ((await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 100 })).messages as unknown[]).length;
    /** swaks with STARTTLS and AUTH PLAIN as `password` (any user name). */
    const sendAuthenticated = (to: string, password: string, extra: string[] = []) =>
      swaks(port, [
        '--tls',
        '--auth',
        'PLAIN',
        '--auth-user',
        'any-name',
        '--auth-password',
        password,
        '--from',
        'relay@sender.test',
        '--to',
        to,
        ...extra,
      ]);

    before(async () => {
      cert = await testCertificate();
      server = await startTestServer({
        env: {
          ALCARTA_SMTP_PORT: '0',
          ALCARTA_SMTP_AUTH: 'required',
          ALCARTA_SMTP_TLS_CERT_FILE: cert.certFile,
          ALCARTA_SMTP_TLS_KEY_FILE: cert.keyFile,
          ALCARTA_SMTP_MAX_CLIENTS: String(MAX_CLIENTS),
        },
      });
      port = server.running.smtpPort!;
      [boxA, boxB] = [await newBox(), await newBox()];
      ingestAll = (await createToken(server.admin, { scopes: ['mail:ingest'], mailboxes: ['*'] })).secret;
      ingestA = (await createToken(server.admin, { scopes: ['mail:ingest'], mailboxes: [boxA.id] })).secret;
      readOnly = (await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] })).secret;
      agent = await connectMcp(server.url, readOnly);
    });

    after(async () => {
      await agent?.close();
      await server?.close();
      if (cert) await rm(cert.dir, { recursive: true, force: true });
    });

    it('offers STARTTLS, and accepts AUTH only once the session is encrypted', async () => {
      const plain = await swaks(port, ['--quit-after', 'EHLO']);
      const ehlo = plain.replies.join('\n');
      assert.match(ehlo, /STARTTLS/);
      // No password in clear text when TLS is configured: AUTH before STARTTLS is refused.
      const clear = await swaks(port, [
        '--auth',
        'PLAIN',
        '--auth-user',
        'u',
        '--auth-password',
        ingestAll,
        '--to',
        boxA.address,
      ]);
      assert.notEqual(clear.code, 0);
      assert.match(repliesWith(clear, '538')[0] ?? '', /^538 5\.7\.0 /, clear.transcript);
      const secured = await swaks(port, ['--tls', '--quit-after', 'EHLO']);
      assert.equal(secured.code, 0, secured.transcript);
      assert.match(secured.replies.join('\n'), /AUTH PLAIN LOGIN/);
    });

    it('delivers over STARTTLS with a mail:ingest token as the AUTH password (PLAIN and LOGIN)', async () => {
      const plain = await sendAuthenticated(boxA.address, ingestAll, ['--header', 'Subject: over TLS']);
      assert.equal(plain.code, 0, plain.transcript);
      assert.match(repliesWith(plain, '235')[0] ?? '', /^235 2\.7\.0 /);
      const login = await swaks(port, [
        '--tls',
        '--auth',
        'LOGIN',
        '--auth-user',
        'whoever',
        '--auth-password',
        ingestAll,
        '--from',
        'relay@sender.test',
        '--to',
        boxB.address,
      ]);
      assert.equal(login.code, 0, login.transcript);
      // nodemailer verifies the certificate against our test CA.
      const transport = createTransport({
        host: '127.0.0.1',
        port,
        secure: false,
        requireTLS: true,
        auth: { user: 'agent', pass: ingestAll },
        tls: { ca: [await readFile(cert.certFile)], servername: 'localhost' },
      });
      try {
        const info = await transport.sendMail({ from: 'n@sender.test', to: boxA.address, subject: 'nm', text: 'x' });
        assert.match(info.response, /^250 /);
      } finally {
        transport.close();
      }
      assert.equal(await count(boxA.id), 2);
      assert.equal(await count(boxB.id), 1);
    });

    it('refuses a wrong token, a token without mail:ingest, a revoked token (535) and no AUTH (530)', async () => {
      const before = await count(boxA.id);
      const failedBefore = await metricValue(server.url, 'alcarta_smtp_messages_total', {
        outcome: 'refused',
        reason: 'auth_failed',
      });
      const revoked = await createToken(server.admin, { scopes: ['mail:ingest'], mailboxes: ['*'] });
      assert.equal((await server.admin.delete(`/v1/tokens/${revoked.id}`)).status, 204);
      for (const password of [`alc_${'x'.repeat(48)}`, readOnly, revoked.secret, 'not-a-token']) {
        const sent = await sendAuthenticated(boxA.address, password);
        assert.notEqual(sent.code, 0);
        assert.match(repliesWith(sent, '535')[0] ?? '', /^535 5\.7\.8 Authentication failed/, sent.transcript);
      }
      const anonymous = await swaks(port, ['--tls', '--from', 'x@sender.test', '--to', boxA.address]);
      assert.notEqual(anonymous.code, 0);
      assert.match(
        repliesWith(anonymous, '530')[0] ?? '',
        /^530 5\.7\.0 Authentication required/,
        anonymous.transcript,
      );
      assert.equal(await count(boxA.id), before);
      assert.equal(
        await metricValue(server.url, 'alcarta_smtp_messages_total', { outcome: 'refused', reason: 'auth_failed' }),
        failedBefore + 4,
      );
      assert.ok(
        (await metricValue(server.url, 'alcarta_smtp_messages_total', {
          outcome: 'refused',
          reason: 'auth_required',
        })) >= 1,
      );
    });

    it('lets a token bound to some mailboxes deliver only to those (others 550 5.1.1)', async () => {
      const [beforeA, beforeB] = [await count(boxA.id), await count(boxB.id)];
      const sent = await sendAuthenticated(`${boxA.address},${boxB.address}`, ingestA);
      assert.equal(sent.code, 0, sent.transcript);
      assert.match(repliesWith(sent, '550')[0] ?? '', /^550 5\.1\.1 /);
      assert.equal(await count(boxA.id), beforeA + 1);
      assert.equal(await count(boxB.id), beforeB);
    });

    it('caps concurrent sessions at ALCARTA_SMTP_MAX_CLIENTS: one more gets 421', async () => {
      const active = () => metricValue(server.url, 'alcarta_smtp_sessions_active');
      await waitFor('earlier sessions to close', async () => (await active()) === 0);
      const sessions = await Promise.all(Array.from({ length: MAX_CLIENTS }, () => RawSmtp.open(port)));
      try {
        for (const session of sessions) assert.match(await session.reply(), /^220 /);
        const extra = await RawSmtp.open(port);
        assert.match(await extra.reply(), /^421 .*Too many connected clients/);
        await extra.closedByServer();
        await sessions[0].command('QUIT');
        await waitFor('a session to end', async () => (await active()) === MAX_CLIENTS - 1);
        const again = await RawSmtp.open(port);
        assert.match(await again.reply(), /^220 /, 'a freed slot is usable again');
        again.destroy();
      } finally {
        for (const session of sessions) session.destroy();
      }
    });
  },
);
