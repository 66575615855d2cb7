import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { dovecotAccount, imapSource, rawMail, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { listedSubjects, occurrences, once } from '../support/mailbox-listing';
import { callOk, connectMcp } from '../support/mcp';
import { requireSystemPackage } from '../support/system-packages';
import { createToken, startTestServer, TestServer } from '../support/test-server';

/** Deliveries measured; the p99 of 100 is the second-slowest. */
const DELIVERIES = 100;
/** docs/connected-mailboxes.md, "Sync": new mail wakes a waiting agent within two seconds. */
const WAKE_BOUND_MS = 2_000;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/**
 * docs/connected-mailboxes.md, "Sync", measured against Debian's Dovecot: every one of a hundred
 * messages APPENDed by a second IMAP client wakes the `email_await` blocked on it, in order, and
 * the 99th percentile of the time from the APPEND to the answer is within two seconds.
 */
describe('connected mailbox wake-up latency', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let dovecot: TestDovecot;
  let server: TestServer;
  let agent: Client;

  before(async () => {
    dovecot = await startDovecot();
    server = await startTestServer({
      env: { ALCARTA_SECRETS_KEY: secretsKey(), ALCARTA_RATE_LIMIT_PER_SECOND: '0' },
    });
    const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    await dovecot?.close();
  });

  it(`wakes a blocked email_await within ${WAKE_BOUND_MS} ms at p99 over ${DELIVERIES} deliveries`, async () => {
    const account = await dovecotAccount(dovecot);
    // An account in use: the first APPEND into a new maildir creates its index and UID list, and
    // Dovecot can then miss telling an IDLE session that started in the same moment until its
    // 30-second mailbox_idle_check_interval (seen on a busy machine). That is Dovecot's start-up,
    // not the wake-up path measured here; connected-mailbox-sync.test.ts covers a new account.
    await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject: 'Already there' }));
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    await sourceReaches(server.admin, mailboxId, 'idle');

    const event = { type: 'message_received', mailbox_id: mailboxId };
    let cursor = (await callOk(agent, 'email_await', { event, timeout_seconds: 0 })).next_cursor as string;
    const latencies: number[] = [];
    const subjects: string[] = [];
    for (let i = 1; i <= DELIVERIES; i++) {
      const subject = `Latency ${i}`;
      subjects.push(subject);
      const waiting = callOk(agent, 'email_await', { event, since_cursor: cursor, timeout_seconds: 30 });
      const appendedAt = performance.now();
      await dovecot.append(account.username, 'INBOX', rawMail({ to: account.username, subject }));
      const woke = await waiting;
      latencies.push(performance.now() - appendedAt);
      assert.equal(woke.matched, true, `delivery ${i}: ${JSON.stringify(woke)}`);
      assert.deepEqual(
        woke.events.map((e: { subject: string }) => e.subject),
        [subject],
        `delivery ${i} wakes the wait with that message alone`,
      );
      cursor = woke.next_cursor as string;
    }

    const sorted = [...latencies].sort((a, b) => a - b);
    const p50 = percentile(sorted, 50);
    const p99 = percentile(sorted, 99);
    console.log(
      `connected mailbox wake-up over ${DELIVERIES} APPENDs: p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, ` +
        `max ${sorted[sorted.length - 1].toFixed(0)} ms`,
    );
    assert.ok(p99 <= WAKE_BOUND_MS, `p99 ${p99.toFixed(0)} ms is within ${WAKE_BOUND_MS} ms`);
    assert.deepEqual(occurrences(await listedSubjects(agent, mailboxId), subjects), once(subjects));
  });
});
