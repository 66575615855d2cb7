import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { RunningServer, startServer } from '#app/server.js';
import { createTestDatabase, TestDatabase } from '../support/database';
import { PrivateCluster } from '../support/private-cluster';
import { RestClient } from '../support/rest';
import { RawSmtp, repliesWith, swaks } from '../support/smtp';
import { freePort, scrubbed, spawnServer } from '../support/spawned-server';
import { createMailbox, randomSecret } from '../support/test-server';
import { serverLogger } from '../support/test-logs';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

/** Opens a session and runs EHLO, MAIL FROM and RCPT TO `to`; returns it ready for DATA. */
async function transactionTo(port: number, to: string): Promise<RawSmtp> {
  const smtp = await RawSmtp.open(port);
  assert.match(await smtp.reply(), /^220 /);
  assert.match(await smtp.command('EHLO client.test'), /^250 /);
  assert.match(await smtp.command('MAIL FROM:<s@sender.test>'), /^250 /);
  assert.match(await smtp.command(`RCPT TO:<${to}>`), /^250 /);
  return smtp;
}

/**
 * "Database trouble → 451 4.3.0" (docs/mail.md): with PostgreSQL stopped, RCPT TO and the end of
 * DATA answer 451 (the sender keeps the message and retries); once it is back the same process
 * accepts mail.
 */
describe('inbound SMTP while the database is down', { skip: requireSystemPackage('swaks') }, () => {
  let cluster: PrivateCluster;
  let server: RunningServer;
  let address: string;
  let mailboxId: string;

  before(async () => {
    cluster = await PrivateCluster.create();
    const adminSecret = randomSecret();
    server = await startServer({
      overrides: {
        DATABASE_URL: cluster.url,
        PORT: '0',
        ALCARTA_HOST: '127.0.0.1',
        ALCARTA_BOOTSTRAP_TOKEN: adminSecret,
        ALCARTA_LOG_LEVEL: 'silent',
        ALCARTA_DB_POOL_SIZE: '5',
        ALCARTA_SMTP_PORT: '0',
      },
      logger: serverLogger('silent'),
    });
    address = `outage-${randomBytes(3).toString('hex')}@example.com`;
    mailboxId = await createMailbox(new RestClient(server.url, adminSecret), address);
  });

  after(async () => {
    await server?.close();
    await cluster?.remove();
  });

  it('answers 451 4.3.0 at RCPT TO and at the end of DATA, and accepts again once PostgreSQL is back', async () => {
    const port = server.smtpPort!;
    const inFlight = await transactionTo(port, address);
    await cluster.stop();

    assert.match(await inFlight.command('DATA'), /^354 /);
    inFlight.write('From: s@sender.test\r\nSubject: during the outage\r\n\r\nbody\r\n');
    assert.match(await inFlight.command('.'), /^451 4\.3\.0 The mail store is unavailable/);
    inFlight.destroy();

    const refused = await swaks(port, ['--from', 's@sender.test', '--to', address]);
    assert.notEqual(refused.code, 0);
    assert.match(repliesWith(refused, '451')[0] ?? '', /^451 4\.3\.0 /, refused.transcript);

    await cluster.start();
    const accepted = await waitFor('SMTP to accept mail again', async () => {
      const sent = await swaks(port, ['--from', 's@sender.test', '--to', address, '--header', 'Subject: after']);
      return sent.code === 0 ? sent : undefined;
    });
    assert.match(accepted.replies.at(-2) ?? '', /^250 /);
    const db = new (await import('pg')).Client({ connectionString: cluster.url });
    await db.connect();
    try {
      const rows = await db.query('SELECT subject FROM messages WHERE mailbox_id = $1', [mailboxId]);
      assert.deepEqual(
        rows.rows.map((r: { subject: string }) => r.subject),
        ['after'],
        'nothing of the refused attempts was stored',
      );
    } finally {
      await db.end();
    }
  });
});

/**
 * docs/mail.md: on SIGTERM the SMTP server answers 421 to new sessions, lets a transaction in
 * flight finish (250 after its commit), then closes with the app and the process exits 0 within the
 * grace period.
 */
describe('inbound SMTP drain on SIGTERM', () => {
  const GRACE_SECONDS = 10;
  let db: TestDatabase;

  before(async () => {
    db = await createTestDatabase();
  });

  after(async () => {
    await db?.drop();
  });

  it('refuses new sessions with 421, lets the session in flight finish its message, and exits 0', async () => {
    const smtpPort = await freePort();
    const adminSecret = randomSecret();
    const server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_BOOTSTRAP_TOKEN: adminSecret,
      ALCARTA_SMTP_PORT: String(smtpPort),
      ALCARTA_SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS),
      ALCARTA_LOG_LEVEL: 'warn',
    });
    try {
      const address = `drain-${randomBytes(3).toString('hex')}@example.com`;
      const mailboxId = await createMailbox(new RestClient(server.url, adminSecret), address);
      const inFlight = await transactionTo(smtpPort, address);

      const signalled = Date.now();
      process.kill(server.pid, 'SIGTERM');
      const refusal = await waitFor('a new session to be refused with 421', async () => {
        const probe = await RawSmtp.open(smtpPort);
        try {
          const greeting = await probe.reply();
          return greeting.startsWith('421') ? greeting : undefined;
        } finally {
          probe.destroy();
        }
      });
      assert.match(refusal, /^421 4\.3\.2 Service shutting down/);

      assert.match(await inFlight.command('DATA'), /^354 /);
      inFlight.write('From: s@sender.test\r\nSubject: in flight\r\n\r\nfinished during the drain\r\n');
      assert.match(await inFlight.command('.'), /^250 2\.6\.0 Accepted/);
      inFlight.destroy();

      const code = await server.exited;
      assert.equal(code, 0, `exit code; stderr:\n${scrubbed(server.stderr())}`);
      assert.ok(Date.now() - signalled < GRACE_SECONDS * 1000, 'exited within the grace period');
      const rows = await db.query<{ subject: string }>('SELECT subject FROM messages WHERE mailbox_id = $1', [
        mailboxId,
      ]);
      assert.deepEqual(
        rows.map((r) => r.subject),
        ['in flight'],
      );
    } finally {
      await server.stop();
    }
  });
});
