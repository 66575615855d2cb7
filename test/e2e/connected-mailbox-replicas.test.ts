import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { createTestDatabase, TestDatabase } from '../support/database';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { listedSubjects, occurrences, once } from '../support/mailbox-listing';
import { callOk } from '../support/mcp';
import { Replica, ReplicaSet } from '../support/replicas';
import { requireSystemPackage } from '../support/system-packages';
import { randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** ALCARTA_IMAP_LEASE_SECONDS of these servers: a dead holder's folders are synced again within it. */
const LEASE_SECONDS = 6;
/** Slack on top of the takeover bound, for a busy machine (as persisted-waits-replicas.test.ts). */
const TAKEOVER_SLACK_MS = 5_000;

/**
 * docs/connected-mailboxes.md, "Sync" ("each folder is held by one replica at a time"), with real
 * server processes on one database and Debian's Dovecot: when the replica holding a connected
 * folder is SIGKILLed, the other takes the folder over within the lease, and every message — those
 * APPENDed before the kill, during the takeover and after it — is in the mailbox exactly once. A
 * replica that shuts down gives its folders up as it goes, without waiting for its lease.
 */
describe('connected mailbox across server processes', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  const secret = randomSecret();
  let db: TestDatabase;
  let dovecot: TestDovecot;
  let replicas: ReplicaSet;

  before(async () => {
    db = await createTestDatabase();
    dovecot = await startDovecot();
    replicas = new ReplicaSet(db.url, secret, {
      ALCARTA_SECRETS_KEY: secretsKey(),
      ALCARTA_IMAP_LEASE_SECONDS: String(LEASE_SECONDS),
      ALCARTA_IMAP_RETRY_MAX_SECONDS: '2',
      ALCARTA_RATE_LIMIT_PER_SECOND: '0',
      ALCARTA_LOG_LEVEL: 'warn',
    });
  });

  after(async () => {
    await replicas?.stopAll();
    await dovecot?.close();
    await db?.drop();
  });

  /** The pid in the folder's holder id (host:pid:random), or null while nobody holds it. */
  const holderPid = async (mailboxId: string) => {
    const [row] = await db.query<{ holder: string | null }>(
      `SELECT holder FROM mailbox_source_folders WHERE mailbox_id = $1 AND folder = 'INBOX'`,
      [mailboxId],
    );
    return row?.holder ? Number(row.holder.split(':')[1]) : null;
  };

  it('a SIGKILLed holder’s folder is taken over within the lease, every message exactly once', async () => {
    const a = await replicas.start('A'); // alone first: it runs the migrations
    const b = await replicas.start('B');
    const account = await dovecotAccount(dovecot);
    const created = await a.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    await sourceReaches(a.admin, mailboxId, 'idle');

    const firstPid = await waitFor('the folder to have a holder', () => holderPid(mailboxId));
    const holder = [a, b].find((r) => r.server.pid === firstPid);
    assert.ok(holder, `the holder ${firstPid} is one of the replicas (${a.server.pid}, ${b.server.pid})`);
    const survivor: Replica = holder === a ? b : a;

    const deliveredLive = async (subject: string) => {
      const event = { type: 'message_received', mailbox_id: mailboxId, subject_contains: subject };
      const waiting = callOk(survivor.client, 'email_await', { event, timeout_seconds: 40 });
      await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject }));
      const woke = await waiting;
      assert.equal(woke.matched, true, `${subject}: ${JSON.stringify(woke)}`);
    };
    await deliveredLive('Before the kill');

    await replicas.stop(holder, 'SIGKILL');
    const killedAt = performance.now();
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'During the takeover' }));
    const bound = LEASE_SECONDS * 1000 + TAKEOVER_SLACK_MS;
    await waitFor(
      'the surviving replica to hold the folder',
      async () => (await holderPid(mailboxId)) === survivor.server.pid,
      {
        timeoutMs: bound,
        intervalMs: 50,
      },
    );
    const heldAfterMs = performance.now() - killedAt;
    await waitFor(
      'the mail APPENDed during the takeover to be in the mailbox',
      async () => (await listedSubjects(survivor.client, mailboxId)).includes('During the takeover'),
      { timeoutMs: bound, intervalMs: 100 },
    );
    const deliveredAfterMs = performance.now() - killedAt;
    console.log(
      `connected folder takeover after SIGKILL (lease ${LEASE_SECONDS} s): held by the survivor after ` +
        `${heldAfterMs.toFixed(0)} ms, mail of the gap stored after ${deliveredAfterMs.toFixed(0)} ms`,
    );
    assert.ok(deliveredAfterMs <= bound, `took over in ${deliveredAfterMs.toFixed(0)} ms (bound ${bound} ms)`);

    await sourceReaches(survivor.admin, mailboxId, 'idle');
    await deliveredLive('After the takeover');
    const subjects = ['Before the kill', 'During the takeover', 'After the takeover'];
    assert.deepEqual(occurrences(await listedSubjects(survivor.client, mailboxId), subjects), once(subjects));
  });

  it('a holder that shuts down (SIGTERM) gives its folders up at once, and nothing is lost', async () => {
    const joined = await replicas.start('C');
    const account = await dovecotAccount(dovecot);
    const created = await joined.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    await sourceReaches(joined.admin, mailboxId, 'idle');
    const pid = await waitFor('the folder to have a holder', () => holderPid(mailboxId));
    const holder = replicas.running.find((r) => r.server.pid === pid);
    assert.ok(holder, `the holder ${pid} is a running replica`);
    const successor = replicas.running.find((r) => r !== holder)!;
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'Before the shutdown' }));
    await waitFor('the mail before the shutdown', async () =>
      (await listedSubjects(successor.client, mailboxId)).includes('Before the shutdown'),
    );

    await replicas.stop(holder, 'SIGTERM');
    // Its lease was ended by the replica itself: otherwise it would stay until another replica's
    // lease tick found it gone (a third of ALCARTA_IMAP_LEASE_SECONDS later at best).
    const leases = await db.query<{ id: string }>(`SELECT id FROM imap_sync_holders WHERE id LIKE $1`, [`%:${pid}:%`]);
    assert.deepEqual(leases, [], 'the stopped replica gave its lease up');
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'After the shutdown' }));
    await waitFor(
      'the successor to hold the folder',
      async () => (await holderPid(mailboxId)) === successor.server.pid,
      {
        timeoutMs: LEASE_SECONDS * 1000 + TAKEOVER_SLACK_MS,
      },
    );
    await waitFor('the mail after the shutdown', async () =>
      (await listedSubjects(successor.client, mailboxId)).includes('After the shutdown'),
    );
    const subjects = ['Before the shutdown', 'After the shutdown'];
    assert.deepEqual(occurrences(await listedSubjects(successor.client, mailboxId), subjects), once(subjects));
  });
});
