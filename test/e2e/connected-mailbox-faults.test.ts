import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { listedSubjects, occurrences, once } from '../support/mailbox-listing';
import { callOk, connectMcp } from '../support/mcp';
import { requireSystemPackage } from '../support/system-packages';
import { TcpProxy } from '../support/tcp-proxy';
import { createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** Reconnects within a couple of seconds, and a connect into a blackhole gives up quickly. */
const RETRY_MAX_SECONDS = 2;
const CONNECT_TIMEOUT_SECONDS = 3;
/** Enough for a few reconnect attempts on a busy machine. */
const RECOVERY_MS = 30_000;

/**
 * docs/connected-mailboxes.md, "Sync" and "Failures", against Debian's Dovecot: mail that arrives
 * while the connection is down is caught up by UID exactly once when it returns (a network cut, a
 * Dovecot restart), the source's state says `unreachable` meanwhile (with a
 * `mailbox_source_changed` event) and `idle` after; a folder whose UIDVALIDITY changes is synced
 * again without storing anything twice.
 */
describe('connected mailbox faults', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let dovecot: TestDovecot;
  let server: TestServer;
  let agent: Client;

  before(async () => {
    dovecot = await startDovecot();
    server = await startTestServer({
      env: {
        ALCARTA_SECRETS_KEY: secretsKey(),
        ALCARTA_IMAP_RETRY_MAX_SECONDS: String(RETRY_MAX_SECONDS),
        ALCARTA_IMAP_CONNECT_TIMEOUT_SECONDS: String(CONNECT_TIMEOUT_SECONDS),
      },
    });
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    await dovecot?.close();
  });

  /** A new account connected to a new mailbox (through `port`, by default Dovecot's own), once idle. */
  const connectedMailbox = async (port?: number) => {
    const account = await dovecotAccount(dovecot);
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account, port === undefined ? {} : { port }),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    await sourceReaches(server.admin, mailboxId, 'idle');
    return { account, mailboxId };
  };

  /** Waits until `subject` is in the mailbox (as list_messages shows it). */
  const listed = (mailboxId: string, subject: string) =>
    waitFor(`"${subject}" in ${mailboxId}`, async () => (await listedSubjects(agent, mailboxId)).includes(subject), {
      timeoutMs: RECOVERY_MS,
      intervalMs: 200,
    });

  /** APPENDs a message with `subject` (`raw`, if given) and waits until a blocked email_await returns it. */
  const deliveredLive = async (mailboxId: string, username: string, subject: string, raw?: string) => {
    const event = { type: 'message_received', mailbox_id: mailboxId, subject_contains: subject };
    const waiting = callOk(agent, 'email_await', { event, timeout_seconds: 30 });
    await dovecot.append(username, 'INBOX', raw ?? rawMail({ to: username, subject }));
    const woke = await waiting;
    assert.equal(woke.matched, true, `${subject}: ${JSON.stringify(woke)}`);
  };

  const sourceEvents = async (mailboxId: string) =>
    (
      await server.db.query<{ payload: { state: string; previous_state: string; last_error: string | null } }>(
        `SELECT payload FROM events WHERE type = 'mailbox_source_changed' AND mailbox_id = $1 ORDER BY id`,
        [mailboxId],
      )
    ).map((row) => row.payload);

  it('catches up exactly once on mail APPENDed while the network to the account is cut', async (t) => {
    const proxy = await TcpProxy.start({ host: dovecot.host, port: dovecot.imapPort });
    t.after(() => proxy.close());
    const { account, mailboxId } = await connectedMailbox(proxy.port);
    await deliveredLive(mailboxId, account.username, 'Before the cut');

    proxy.blackhole();
    await sourceReaches(server.admin, mailboxId, 'unreachable', RECOVERY_MS);
    // Dovecot itself runs: the mail arrives in the account while Alcarta tries to reconnect.
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'During the cut' }));
    proxy.restore();

    await listed(mailboxId, 'During the cut');
    await sourceReaches(server.admin, mailboxId, 'idle', RECOVERY_MS);
    await deliveredLive(mailboxId, account.username, 'After the cut');
    const subjects = ['Before the cut', 'During the cut', 'After the cut'];
    assert.deepEqual(occurrences(await listedSubjects(agent, mailboxId), subjects), once(subjects));
  });

  it('syncs a folder whose UIDVALIDITY changed again without duplicates, and live mail after it', async () => {
    const { account, mailboxId } = await connectedMailbox();
    const earlier = ['Kept A', 'Kept B'].map((subject) => ({
      subject,
      raw: rawMail({ to: account.username, subject }),
    }));
    for (const { subject, raw } of earlier) await deliveredLive(mailboxId, account.username, subject, raw);
    const folderRow = async () =>
      (
        await server.db.query<{ uid_validity: string }>(
          `SELECT uid_validity::text FROM mailbox_source_folders WHERE mailbox_id = $1 AND folder = 'INBOX'`,
          [mailboxId],
        )
      )[0];
    const before = await dovecot.uidValidity(account.username, 'INBOX');
    assert.equal((await folderRow()).uid_validity, String(before));

    await dovecot.recreateFolder(account.username, 'INBOX');
    const renewed = await dovecot.uidValidity(account.username, 'INBOX');
    // The provider rebuilt the folder: the same messages come back under new UIDs.
    await dovecot.appendMany(
      account.username,
      'INBOX',
      earlier.map((m) => m.raw),
    );
    await waitFor(
      'the folder to be synced under its new UIDVALIDITY',
      async () => (await folderRow()).uid_validity === String(renewed),
      { timeoutMs: RECOVERY_MS, intervalMs: 100 },
    );
    await sourceReaches(server.admin, mailboxId, 'idle', RECOVERY_MS);
    await deliveredLive(mailboxId, account.username, 'After the reset');

    const subjects = ['Kept A', 'Kept B', 'After the reset'];
    assert.deepEqual(occurrences(await listedSubjects(agent, mailboxId), subjects), once(subjects));
  });

  it('goes unreachable while Dovecot restarts, then idle, and catches up on the mail around it', async () => {
    const { account, mailboxId } = await connectedMailbox();
    await deliveredLive(mailboxId, account.username, 'Before the restart');

    await dovecot.stop();
    const down = await sourceReaches(server.admin, mailboxId, 'unreachable', RECOVERY_MS);
    assert.equal(typeof down.last_error, 'string', JSON.stringify(down));
    await dovecot.start();
    // Most likely before Alcarta's next attempt (it backs off): caught up on reconnect, not woken by IDLE.
    await dovecot.append(
      account.username,
      'INBOX',
      rawMail({ to: account.username, subject: 'Right after the restart' }),
    );
    await listed(mailboxId, 'Right after the restart');
    const up = await sourceReaches(server.admin, mailboxId, 'idle', RECOVERY_MS);
    assert.equal(up.last_error, null, JSON.stringify(up));
    await deliveredLive(mailboxId, account.username, 'After the restart');

    const subjects = ['Before the restart', 'Right after the restart', 'After the restart'];
    assert.deepEqual(occurrences(await listedSubjects(agent, mailboxId), subjects), once(subjects));
    const changes = (await sourceEvents(mailboxId)).map((e) => `${e.previous_state}->${e.state}`);
    const wentDown = changes.findIndex((c) => c.endsWith('->unreachable'));
    assert.ok(wentDown >= 0, `a mailbox_source_changed event to unreachable: ${JSON.stringify(changes)}`);
    assert.ok(
      changes.slice(wentDown + 1).some((c) => c.endsWith('->idle')),
      `a mailbox_source_changed event back to idle after it: ${JSON.stringify(changes)}`,
    );
    const unreachable = (await sourceEvents(mailboxId)).find((e) => e.state === 'unreachable');
    assert.equal(typeof unreachable?.last_error, 'string', JSON.stringify(unreachable));
  });
});
