import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { metricValue } from '../support/metrics';
import { RawSmtp } from '../support/smtp';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const plain = (password: string) => Buffer.from(`\0any-name\0${password}`).toString('base64');

/**
 * Throttling of guesses, and revocation ending SMTP sessions within 1 s: a session is closed
 * with 421 after 5 failed AUTH attempts or 20 unknown recipients, the next session of that client
 * waits for its greeting (other clients do not), and a revoked token's session gets 421 and is
 * closed at once, storing nothing it sent. Each test talks from a loopback address of its own (one
 * client each, as the throttle sees it).
 */
describe('inbound SMTP against guessing and revoked tokens', () => {
  let server: TestServer;
  /** A second replica on the same database: revocations reach its sessions by the doorbell. */
  let replica: TestServer;
  let port: number;
  let replicaPort: number;
  let address: string;
  let mailboxId: string;
  let ingest: { id: string; secret: string };

  const ended = (reason: string) => metricValue(server.url, 'alcarta_smtp_sessions_ended_total', { reason });
  const stored = async () =>
    (await server.db.query('SELECT id FROM messages WHERE mailbox_id = $1', [mailboxId])).length;
  /** A session from `client` that has said EHLO (and AUTH with `secret`, if given). */
  const session = async (client: string, secret?: string, onPort = port) => {
    const smtp = await RawSmtp.open(onPort, client);
    assert.match(await smtp.reply(), /^220 /);
    assert.match(await smtp.command('EHLO client.test'), /^250 /);
    if (secret) assert.match(await smtp.command(`AUTH PLAIN ${plain(secret)}`), /^235 /);
    return smtp;
  };

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_SMTP_PORT: '0', ALCARTA_SMTP_AUTH: 'required' } });
    port = server.running.smtpPort!;
    address = `guess-${randomBytes(4).toString('hex')}@example.com`;
    mailboxId = await createMailbox(server.admin, address);
    ingest = await createToken(server.admin, { scopes: ['mail:ingest'], mailboxes: ['*'] });
    replica = await startTestServer({
      db: server.db,
      adminToken: server.adminToken,
      env: { ALCARTA_SMTP_PORT: '0', ALCARTA_SMTP_AUTH: 'required' },
    });
    replicaPort = replica.running.smtpPort!;
  });

  after(async () => {
    await replica?.close({ keepDatabase: true });
    await server?.close();
  });

  it('closes a session with 421 after 5 failed AUTH attempts and slows the next one of that client', async () => {
    const smtp = await session('127.0.0.2');
    for (let attempt = 1; attempt < 5; attempt++) {
      assert.match(await smtp.command(`AUTH PLAIN ${plain(`alc_${'x'.repeat(48)}`)}`), /^535 5\.7\.8 /);
    }
    assert.match(
      await smtp.command(`AUTH PLAIN ${plain('wrong')}`),
      /^421 4\.7\.0 Too many failed authentication attempts/,
    );
    await smtp.closedByServer();
    assert.equal(await ended('failed_auths'), 1);

    const started = Date.now();
    const next = await RawSmtp.open(port, '127.0.0.2');
    assert.match(await next.reply(), /^220 /);
    const waited = Date.now() - started;
    assert.ok(waited >= 1800, `the next session of that client waited ${waited} ms for its greeting`);
    assert.equal(await metricValue(server.url, 'alcarta_smtp_sessions_slowed_total'), 1);
    // It still works: a correct token is accepted.
    assert.match(await next.command('EHLO client.test'), /^250 /);
    assert.match(await next.command(`AUTH PLAIN ${plain(ingest.secret)}`), /^235 /);
    next.destroy();

    const otherStarted = Date.now();
    const other = await RawSmtp.open(port, '127.0.0.3');
    assert.match(await other.reply(), /^220 /);
    assert.ok(Date.now() - otherStarted < 1000, 'another client is not slowed');
    other.destroy();
  });

  it('closes a session with 421 after 20 unknown recipients', async () => {
    const smtp = await session('127.0.0.4', ingest.secret);
    assert.match(await smtp.command('MAIL FROM:<g@sender.test>'), /^250 /);
    assert.match(await smtp.command(`RCPT TO:<${address}>`), /^250 /, 'a known recipient is no guess');
    for (let i = 1; i < 20; i++) {
      assert.match(await smtp.command(`RCPT TO:<nobody-${i}@example.com>`), /^550 5\.1\.1 /);
    }
    assert.match(await smtp.command('RCPT TO:<nobody-20@example.com>'), /^421 4\.7\.0 Too many unknown recipients/);
    await smtp.closedByServer();
    assert.equal(await ended('unknown_recipients'), 1);
    assert.equal(await stored(), 0);
  });

  it('ends the sessions of a revoked token within 1 s on every replica, mid-DATA too, storing nothing they send', async (t) => {
    const revoked = await createToken(server.admin, { scopes: ['mail:ingest'], mailboxes: [mailboxId] });
    const idle = await session('127.0.0.5', revoked.secret);
    const sending = await session('127.0.0.5', revoked.secret, replicaPort);
    const bystander = await session('127.0.0.6', ingest.secret);
    assert.match(await sending.command('MAIL FROM:<r@sender.test>'), /^250 /);
    assert.match(await sending.command(`RCPT TO:<${address}>`), /^250 /);
    assert.match(await sending.command('DATA'), /^354 /);
    sending.write(`From: r@sender.test\r\nSubject: half sent\r\n\r\n${'first half\r\n'.repeat(100)}`);

    const requested = Date.now();
    assert.equal((await server.admin.delete(`/v1/tokens/${revoked.id}`)).status, 204);
    // The revocation has committed once it is answered; the sessions may even end before that.
    const revokedAt = Date.now();
    for (const smtp of [idle, sending]) {
      assert.match(await smtp.reply(2000), /^421 4\.7\.0 The token was revoked/);
      await smtp.closedByServer(2000);
    }
    const took = Date.now() - revokedAt;
    t.diagnostic(`the sessions ended ${took} ms after the revocation (its request took ${revokedAt - requested} ms)`);
    assert.ok(took <= 1000, `the sessions ended ${took} ms after the revocation`);
    // What the client still sends goes nowhere.
    sending.write(`${'second half\r\n'.repeat(100)}\r\n.\r\n`);
    assert.equal(await ended('credential_revoked'), 1);
    assert.equal(
      await metricValue(replica.url, 'alcarta_smtp_sessions_ended_total', { reason: 'credential_revoked' }),
      1,
    );

    assert.match(await bystander.command('MAIL FROM:<b@sender.test>'), /^250 /, 'another token keeps its session');
    assert.match(await bystander.command(`RCPT TO:<${address}>`), /^250 /);
    assert.match(await bystander.command('DATA'), /^354 /);
    bystander.write('From: b@sender.test\r\nSubject: still here\r\n\r\nhello\r\n');
    assert.match(await bystander.command('.'), /^250 /);
    bystander.destroy();
    assert.deepEqual(await server.db.query('SELECT subject FROM messages WHERE mailbox_id = $1', [mailboxId]), [
      { subject: 'still here' },
    ]);
    idle.destroy();
    sending.destroy();
  });

  it('ends a session whose token has expired at its next MAIL FROM', async () => {
    const expiresAt = Date.now() + 1500;
    const expiring = await createToken(server.admin, {
      scopes: ['mail:ingest'],
      mailboxes: ['*'],
      expires_at: new Date(expiresAt).toISOString(),
    });
    const smtp = await session('127.0.0.7', expiring.secret);
    await waitFor('the token to expire', () => Date.now() > expiresAt + 50, { timeoutMs: 5000 });
    assert.match(await smtp.command('MAIL FROM:<e@sender.test>'), /^421 4\.7\.0 The token has expired/);
    await smtp.closedByServer();
    assert.equal(await ended('credential_expired'), 1);
  });
});
