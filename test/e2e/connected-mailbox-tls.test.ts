import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { createTestDatabase, TestDatabase } from '../support/database';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { callOk, connectMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { spawnServer, SpawnedServer } from '../support/spawned-server';
import { requireSystemPackage } from '../support/system-packages';
import { createToken, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/**
 * docs/connected-mailboxes.md, "Connecting an account": the TLS modes against Debian's Dovecot, whose
 * certificate the server process trusts through NODE_EXTRA_CA_CERTS (as an operator trusts a private
 * CA): `implicit` on the IMAPS port and `starttls` on the IMAP port both sync, and mail leaves through
 * the submission server after STARTTLS. Mismatches are refused (connected-mailbox-refusals.test.ts).
 */
describe('connected mailboxes over TLS', { skip: requireSystemPackage('dovecot-submissiond') }, () => {
  let dovecot: TestDovecot;
  let db: TestDatabase;
  let server: SpawnedServer;
  let admin: RestClient;
  let agent: Client;

  before(async () => {
    dovecot = await startDovecot();
    db = await createTestDatabase();
    const adminToken = randomSecret();
    server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_BOOTSTRAP_TOKEN: adminToken,
      ALCARTA_SECRETS_KEY: secretsKey(),
      NODE_EXTRA_CA_CERTS: dovecot.certFile,
    });
    admin = new RestClient(server.url, adminToken);
    const token = await createToken(admin, { scopes: ['mail:read'], mailboxes: ['*'] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.stop();
    await db?.drop();
    await dovecot?.close();
  });

  for (const mode of ['implicit', 'starttls'] as const) {
    it(`syncs with "tls": "${mode}"`, async () => {
      const account = await dovecotAccount(dovecot);
      const port = mode === 'implicit' ? dovecot.imapsPort : dovecot.imapPort;
      const created = await admin.post('/v1/mailboxes', {
        address: account.username,
        source: imapSource(dovecot, account, { port, tls: mode }),
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const mailboxId = created.body.mailbox_id as string;
      await sourceReaches(admin, mailboxId, 'idle');
      const tested = await admin.post(`/v1/mailboxes/${mailboxId}/source/test`);
      assert.deepEqual(tested.body, { ok: true, imap: { folders: [{ name: 'INBOX', messages: 0 }] } });
      await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: `Over ${mode}` }));
      await waitFor(`the message synced over ${mode}`, async () => {
        const page = await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 10 });
        return page.messages.some((m: { subject: string }) => m.subject === `Over ${mode}`);
      });
    });
  }

  it('signs in to the submission server after STARTTLS', async () => {
    const account = await dovecotAccount(dovecot);
    const created = await admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account, {
        port: dovecot.imapsPort,
        tls: 'implicit',
        smtp: { host: dovecot.host, port: dovecot.submissionPort, tls: 'starttls' },
      }),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const tested = await admin.post(`/v1/mailboxes/${created.body.mailbox_id as string}/source/test`);
    assert.equal(tested.body.ok, true, JSON.stringify(tested.body));
    assert.deepEqual(tested.body.smtp, { ok: true });
  });
});
