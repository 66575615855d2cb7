import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { MailIdentityProvider, startMailIdentityProvider } from '../support/mail-identity-provider';
import { callOk, connectMcp } from '../support/mcp';
import { headerOf, TestSmtpRelay } from '../support/smtp-relay';
import { requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/**
 * docs/connected-mailboxes.md, "Sending" and "Sender authentication", against Debian's Dovecot: an
 * approved send_email of a connected mailbox leaves through the account's own submission server
 * (Dovecot's, relaying to a real SMTP server), signed in as the account with its password or an
 * XOAUTH2 token, and the same message lands in the account's Sent folder; the server itself has no
 * relay, so other mailboxes' mail stays not_configured. A provider's Authentication-Results counts
 * only from a trusted authserv-id.
 */
describe(
  'connected mailbox sending',
  { skip: requireSystemPackage('dovecot-submissiond') ?? requireSystemPackage('python3-aiosmtpd') },
  () => {
    let relay: TestSmtpRelay;
    let idp: MailIdentityProvider;
    let dovecot: TestDovecot;
    let server: TestServer;
    let agent: Client;

    const deliveryStatus = async (messageId: string) =>
      ((await callOk(agent, 'get_message', { message_id: messageId })).delivery as { status: string }).status;
    const sendApproved = async (mailboxId: string, subject: string) => {
      const { request_id: requestId } = await callOk(agent, 'send_email', {
        mailbox_id: mailboxId,
        to: ['customer@example.net'],
        subject,
        text: 'Your invoice is attached in spirit.',
      });
      const approved = await server.admin.post(`/v1/requests/${requestId}/approve`, {});
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      return approved.body.sent_message_id as string;
    };
    /** The message as the relay got it, and its copy in the account's Sent folder. */
    const deliveredAndKept = async (username: string, messageId: string) => {
      await waitFor(`${messageId} to be sent`, async () => (await deliveryStatus(messageId)) === 'sent', {
        timeoutMs: 30_000,
        intervalMs: 100,
      });
      const header = (await callOk(agent, 'get_message', { message_id: messageId })).message_id_header as string;
      const [received] = await relay.receivedWithMessageId(header);
      assert.ok(received, 'the relay behind the submission server received the message');
      assert.deepEqual(received.rcptTos, ['customer@example.net']);
      const sent = await waitFor(`the copy of ${header} in Sent`, async () =>
        (await dovecot.messages(username, 'Sent')).find((m) => m.messageId === header),
      );
      return { received, sent };
    };

    before(async () => {
      relay = await TestSmtpRelay.start();
      idp = await startMailIdentityProvider();
      dovecot = await startDovecot({
        relay: { host: '127.0.0.1', port: relay.port },
        oauth2: { introspectionUrl: idp.introspectionUrl, mechanisms: ['xoauth2'] },
      });
      server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: secretsKey() } });
      const token = await createToken(server.admin, {
        scopes: ['mail:read', 'mail:send', 'approvals:read'],
        mailboxes: ['*'],
      });
      agent = await connectMcp(server.url, token.secret);
    });

    after(async () => {
      await agent?.close();
      await server?.close();
      await dovecot?.close();
      await idp?.close();
      await relay?.stop();
    });

    const submission = () => ({ host: dovecot.host, port: dovecot.submissionPort, tls: 'none' });

    it("sends through the account's submission server with its password, and keeps a copy in Sent", async () => {
      const account = await dovecotAccount(dovecot);
      await dovecot.createFolder(account.username, 'Sent');
      const created = await server.admin.post('/v1/mailboxes', {
        address: account.username,
        source: imapSource(dovecot, account, { smtp: submission(), save_sent: 'Sent' }),
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const mailboxId = created.body.mailbox_id as string;
      const messageId = await sendApproved(mailboxId, 'Invoice 7 (password)');
      const { received, sent } = await deliveredAndKept(account.username, messageId);
      assert.equal(received.mailFrom, account.username);
      assert.equal(headerOf(received.raw, 'subject'), 'Invoice 7 (password)');
      assert.equal(sent.subject, 'Invoice 7 (password)');
    });

    it('sends with an XOAUTH2 access token from the refresh-token grant', async () => {
      const account = await dovecotAccount(dovecot);
      await dovecot.createFolder(account.username, 'Sent');
      const refreshToken = await idp.refreshTokenFor(account.username);
      const created = await server.admin.post('/v1/mailboxes', {
        address: account.username,
        source: imapSource(dovecot, account, {
          auth: {
            xoauth2: {
              token_url: idp.tokenUrl,
              client_id: idp.clientId,
              client_secret: idp.clientSecret,
              refresh_token: refreshToken,
              scope: idp.scope,
            },
          },
          smtp: submission(),
          save_sent: 'Sent',
        }),
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const messageId = await sendApproved(created.body.mailbox_id as string, 'Invoice 8 (XOAUTH2)');
      const { sent } = await deliveredAndKept(account.username, messageId);
      assert.equal(sent.subject, 'Invoice 8 (XOAUTH2)');
    });

    it("other mailboxes' mail has no way out here: not_configured, as without a relay", async () => {
      const plain = await createMailbox(server.admin);
      const messageId = await sendApproved(plain, 'Nowhere to go');
      assert.equal(await deliveryStatus(messageId), 'not_configured');
    });

    it("trusts a provider's Authentication-Results only from a trusted authserv-id", async () => {
      const account = await dovecotAccount(dovecot);
      const created = await server.admin.post('/v1/mailboxes', {
        address: account.username,
        source: imapSource(dovecot, account, { trusted_authserv_ids: ['mx.provider.test'] }),
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const mailboxId = created.body.mailbox_id as string;
      await sourceReaches(server.admin, mailboxId, 'idle');
      const results =
        'spf=pass smtp.mailfrom=example.org; dkim=pass header.d=example.org; dmarc=pass header.from=example.org';
      const withResults = (authservId: string, subject: string) =>
        `Authentication-Results: ${authservId}; ${results}\r\n${rawMail({ to: account.username, subject })}`;
      await dovecot.append(account.username, 'INBOX', withResults('mx.provider.test', 'Checked by the provider'));
      await dovecot.append(account.username, 'INBOX', withResults('mx.forger.test', 'Forged results'));
      const listed = await waitFor('both messages', async () => {
        const page = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 10 });
        return page.messages.length === 2 ? (page.messages as Array<Record<string, any>>) : undefined;
      });
      const bySubject = new Map(listed.map((m) => [m.subject as string, m]));
      const trusted = bySubject.get('Checked by the provider')!;
      assert.deepEqual(
        { ...trusted.authentication, from_verified: trusted.from_verified },
        { spf: 'pass', dkim: 'pass', dmarc: 'pass', arc: 'none', from_verified: true },
      );
      const forged = bySubject.get('Forged results')!;
      assert.equal(forged.authentication.dmarc === 'pass', false, 'an untrusted authserv-id is ignored');
      assert.equal(forged.from_verified, false);
    });
  },
);
