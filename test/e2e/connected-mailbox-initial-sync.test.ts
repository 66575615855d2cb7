import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { createTestDatabase, TestDatabase } from '../support/database';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { listedSubjects } from '../support/mailbox-listing';
import { callOk } from '../support/mcp';
import { metricValue } from '../support/metrics';
import { ReplicaSet } from '../support/replicas';
import { requireSystemPackage } from '../support/system-packages';
import { randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/**
 * Messages already in the account when it is connected. Ten thousand take minutes to APPEND and to
 * sync on a busy two-core machine: the benchmark measures that many; this file stays quick.
 */
const MESSAGES = 2_000;
/**
 * The memory limit the Helm chart gives a replica (helm/alcarta/values.yaml): the sync must never
 * take the process near it, or Kubernetes would kill the replica mid-sync. The growth itself is
 * printed; the benchmark (`npm run bench:imap`) measures it for 10,000 messages. A growth bound of
 * its own here would measure the garbage collector's timing more than the sync: with messages of a
 * few KiB, holding all of them would cost far less than the collector's slack (up to 150 MiB on
 * Node 24, seen in CI).
 */
const CHART_MEMORY_LIMIT = 512 * 1024 * 1024;
/** "Live mail first": a message APPENDed mid-sync wakes its wait within a few seconds. */
const LIVE_BOUND_MS = 5_000;
const MiB = 1024 * 1024;

/**
 * docs/connected-mailboxes.md, "Sync" ("an initial sync walks the older mail in small batches
 * between live ones"): an account of thousands of messages connected with `sync_from: "all"` is
 * synced completely, each message once, while the server process stays within the memory a
 * replica is given; mail APPENDed in the middle of it wakes a waiting agent within seconds, ahead of
 * the older mail still to come.
 */
describe('connected mailbox initial sync', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let db: TestDatabase;
  let dovecot: TestDovecot;
  let replicas: ReplicaSet;

  before(async () => {
    db = await createTestDatabase();
    dovecot = await startDovecot();
    replicas = new ReplicaSet(db.url, randomSecret(), {
      ALCARTA_SECRETS_KEY: secretsKey(),
      ALCARTA_RATE_LIMIT_PER_SECOND: '0',
      ALCARTA_LOG_LEVEL: 'warn',
    });
  });

  after(async () => {
    await replicas?.stopAll();
    await dovecot?.close();
    await db?.drop();
  });

  it(`syncs ${MESSAGES} messages once each, in bounded memory, with live mail first`, async () => {
    const account = await dovecotAccount(dovecot);
    const older = Array.from({ length: MESSAGES }, (_, i) => `Older ${i + 1}`);
    const appendStarted = performance.now();
    await dovecot.appendMany(
      account.username,
      'INBOX',
      older.map((subject) => rawMail({ to: account.username, subject, body: `${subject}\r\n${'x'.repeat(2000)}` })),
    );
    console.log(`APPENDed ${MESSAGES} messages in ${((performance.now() - appendStarted) / 1000).toFixed(1)} s`);

    const replica = await replicas.start('A');
    const rss = () => metricValue(replica.server.url, 'alcarta_process_resident_memory_bytes');
    const baseline = await rss();
    assert.ok(baseline > 0, 'the server reports its resident memory');
    let peak = baseline;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await rss());
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();

    const syncStarted = performance.now();
    const created = await replica.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account, { sync_from: 'all' }),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    const stored = async () =>
      (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM messages WHERE mailbox_id = $1', [mailboxId]))[0]
        .n;

    await waitFor('the initial sync to be under way', async () => (await stored()) >= MESSAGES / 10, {
      timeoutMs: 120_000,
      intervalMs: 50,
    });
    const event = { type: 'message_received', mailbox_id: mailboxId, subject_contains: 'Live during the sync' };
    const waiting = callOk(replica.client, 'email_await', { event, timeout_seconds: 60 });
    const appendedAt = performance.now();
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'Live during the sync' }));
    const woke = await waiting;
    const liveMs = performance.now() - appendedAt;
    const storedWhenLive = await stored();
    assert.equal(woke.matched, true, JSON.stringify(woke));
    assert.ok(
      storedWhenLive < MESSAGES + 1,
      `the live message came before the end of the initial sync (${storedWhenLive})`,
    );
    assert.ok(liveMs <= LIVE_BOUND_MS, `live mail mid-sync woke its wait in ${liveMs.toFixed(0)} ms`);

    await waitFor('every message to be stored', async () => (await stored()) === MESSAGES + 1, {
      timeoutMs: 300_000,
      intervalMs: 200,
    });
    const syncSeconds = (performance.now() - syncStarted) / 1000;
    await sourceReaches(replica.admin, mailboxId, 'idle');
    sampling = false;
    await sampler;

    const listed = await listedSubjects(replica.client, mailboxId);
    assert.equal(listed.length, MESSAGES + 1, 'every message listed once');
    assert.equal(new Set(listed).size, MESSAGES + 1, 'no subject listed twice');
    assert.deepEqual(
      older.filter((s) => !listed.includes(s)),
      [],
      'none of the older messages is missing',
    );
    assert.ok(
      listed.indexOf('Live during the sync') < listed.indexOf(older[older.length - 1]),
      'the live message is stored before the last of the older ones',
    );
    const growth = peak - baseline;
    console.log(
      `initial sync of ${MESSAGES} messages: ${syncSeconds.toFixed(1)} s; live mail mid-sync woke its wait in ` +
        `${liveMs.toFixed(0)} ms (${storedWhenLive} stored by then); RSS ${(baseline / MiB).toFixed(0)} MiB -> peak ` +
        `${(peak / MiB).toFixed(0)} MiB (growth ${(growth / MiB).toFixed(0)} MiB)`,
    );
    assert.ok(peak < CHART_MEMORY_LIMIT, `RSS peaked at ${(peak / MiB).toFixed(0)} MiB`);
  });
});
