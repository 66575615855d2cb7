import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { callOk, connectMcp } from '../support/mcp';
import { requireSystemPackage } from '../support/system-packages';
import { TcpProxy } from '../support/tcp-proxy';
import { createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** ALCARTA_IMAP_IDLE_SECONDS here: its lowest value, so that renewals come within the test. */
const IDLE_SECONDS = 10;

/**
 * docs/connected-mailboxes.md, "Sync": an idle connection renews its IDLE command every
 * ALCARTA_IMAP_IDLE_SECONDS (servers end an IDLE after 30 minutes, RFC 2177), on the same
 * connection, and still wakes on new mail after the renewals. The IMAP commands are counted on the
 * wire, through a TCP relay between Alcarta and Debian's Dovecot.
 */
describe('connected mailbox IDLE renewal', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let dovecot: TestDovecot;
  let proxy: TcpProxy;
  let server: TestServer;
  let agent: Client;
  let commands = '';

  before(async () => {
    dovecot = await startDovecot();
    proxy = await TcpProxy.start(
      { host: dovecot.host, port: dovecot.imapPort },
      { tap: (chunk) => (commands += chunk.toString('latin1')) },
    );
    server = await startTestServer({
      env: { ALCARTA_SECRETS_KEY: secretsKey(), ALCARTA_IMAP_IDLE_SECONDS: String(IDLE_SECONDS) },
    });
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    await proxy?.close();
    await dovecot?.close();
  });

  it(`renews IDLE every ${IDLE_SECONDS} s on the same connection, and still wakes on new mail`, async () => {
    const account = await dovecotAccount(dovecot);
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account, { port: proxy.port }),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    await sourceReaches(server.admin, mailboxId, 'idle');
    const count = (pattern: RegExp) => (commands.match(pattern) ?? []).length;
    const logins = count(/ (LOGIN|AUTHENTICATE) /g);
    // Two renewals: each ends the IDLE (DONE) and starts the next one.
    await waitFor('two IDLE renewals', () => count(/^DONE\r?$/gm) >= 2 && count(/ IDLE\r?$/gm) >= 3, {
      timeoutMs: IDLE_SECONDS * 3 * 1000 + 15_000,
      intervalMs: 250,
    });
    assert.equal(count(/ (LOGIN|AUTHENTICATE) /g), logins, 'renewed on the same connection, no new sign-in');

    const event = { type: 'message_received', mailbox_id: mailboxId };
    const waiting = callOk(agent, 'email_await', { event, timeout_seconds: 20 });
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'After the renewals' }));
    const woke = await waiting;
    assert.equal(woke.matched, true, JSON.stringify(woke));
    assert.deepEqual(
      woke.events.map((e: { subject: string }) => e.subject),
      ['After the renewals'],
    );
  });
});
