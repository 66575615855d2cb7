import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { callOk, connectMcp } from '../support/mcp';
import { requireSystemPackage } from '../support/system-packages';
import { createToken, startTestServer, TestServer } from '../support/test-server';

/**
 * docs/connected-mailboxes.md, "Sync", against Debian's Dovecot: mail delivered into the account
 * by a second real IMAP client reaches the mailbox through the one ingest path, and wakes a
 * blocked `email_await`.
 */
describe('connected mailbox sync', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let dovecot: TestDovecot;
  let server: TestServer;
  let agent: Client;

  before(async () => {
    dovecot = await startDovecot();
    server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: secretsKey() } });
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    await dovecot?.close();
  });

  it('new mail in the account wakes a blocked email_await', async () => {
    const account = await dovecotAccount(dovecot);
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    assert.equal(created.body.source.auth.kind, 'password');
    assert.equal(JSON.stringify(created.body).includes(account.password), false, 'the password is never shown');
    await sourceReaches(server.admin, mailboxId, 'idle');

    const event = { type: 'message_received', mailbox_id: mailboxId };
    const first = await callOk(agent, 'email_await', { event, timeout_seconds: 0 });
    const waiting = callOk(agent, 'email_await', { event, since_cursor: first.next_cursor, timeout_seconds: 20 });
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'Invoice 42' }));
    const woke = await waiting;
    assert.equal(woke.matched, true, JSON.stringify(woke));
    assert.deepEqual(
      woke.events.map((e: { subject: string }) => e.subject),
      ['Invoice 42'],
    );
  });
});
