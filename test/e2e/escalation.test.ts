import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { postSignIn } from '../support/console';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk } from '../support/mcp';
import { activeWaits, metricValue } from '../support/metrics';
import { Replica, ReplicaSet } from '../support/replicas';
import { TestSmtpRelay } from '../support/smtp-relay';
import { requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** The policy's escalation time: the shortest it allows. The tests bring it forward by SQL. */
const ESCALATE_AFTER_SECONDS = 60;
/** May decide by mail (the policy lists it), so its escalation mail carries a deciding link. */
const BOSS = 'boss@escalation.example';
/** Only told: its escalation mail links to the console's page of the request. */
const OPS = 'ops@escalation.example';

interface EscalationMail {
  to: string[];
  subject: string;
  text: string;
}

/**
 * Escalation (docs/policies.md "Escalation") with real server processes on one database and a real
 * SMTP relay (Debian's aiosmtpd): a pending request nobody decided by its policy's escalation time
 * is escalated exactly once however many replicas sweep and across SIGKILL and restart: one
 * `request_escalated` event, one audit entry, one escalation mail per `escalate_to` address, and
 * `escalated_at` on the request and its console page. A request wait parked before does not
 * return on it (waits wake on state changes only), and the boss's escalation link decides.
 *
 * The passage of time is simulated: a test sets a request's `escalate_at` to now() by SQL instead
 * of waiting out the policy's minute. Sweeps are observed through each process's
 * `alcarta_request_deadline_sweeps_total`, never by sleeping.
 */
describe('escalation of approval requests', { skip: requireSystemPackage('python3-aiosmtpd') }, () => {
  const secret = randomSecret();
  let relay: TestSmtpRelay;
  let db: TestDatabase;
  let replicas: ReplicaSet;
  let a: Replica;
  let b: Replica;
  let mailboxId: string;

  /** The escalation mails of `requestId` the relay received so far. */
  const escalationMails = async (requestId: string): Promise<EscalationMail[]> => {
    const mails: EscalationMail[] = [];
    for (const received of await relay.received()) {
      const parsed = await simpleParser(received.raw);
      const text = parsed.text ?? '';
      if (!parsed.subject?.startsWith('Escalated:') || !text.includes(requestId)) continue;
      mails.push({ to: received.rcptTos, subject: parsed.subject, text });
    }
    return mails;
  };
  const bothMailed = (requestId: string) =>
    waitFor(
      `the escalation mails of ${requestId}`,
      async () => {
        const mails = await escalationMails(requestId);
        return mails.length >= 2 ? mails : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  /** Simulates the passage of the policy's escalation time: the request is due now. */
  const makeDue = (requestId: string) =>
    db.query(`UPDATE approval_requests SET escalate_at = now() WHERE id = $1`, [requestId]);
  const sweeps = (replica: Replica) => metricValue(replica.server.url, 'alcarta_request_deadline_sweeps_total');
  /**
   * Until every one of `running` has completed two more sweeps: the second began after this call,
   * so whatever any of them would still escalate (or mail) is done by then.
   */
  const sweptAgain = async (running: Replica[]) => {
    const before = await Promise.all(running.map(sweeps));
    await waitFor(
      'every replica to sweep twice more',
      async () => (await Promise.all(running.map(sweeps))).every((n, i) => n >= before[i] + 2),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  };
  const newRequest = async (replica: Replica, title: string) =>
    (await callOk(replica.client, 'request_approval', { mailbox_id: mailboxId, title })).request_id as string;
  const escalationEvents = (requestId: string) =>
    db.query<{ payload: Record<string, unknown> }>(
      `SELECT payload FROM events WHERE request_id = $1 AND type = 'request_escalated'`,
      [requestId],
    );
  const auditEntries = (requestId: string) =>
    db.query<{ actor: Record<string, unknown>; subject: Record<string, unknown> }>(
      `SELECT actor, subject FROM audit_log WHERE action = 'request_escalated' AND subject->>'request_id' = $1`,
      [requestId],
    );
  const escalationMailRows = async (requestId: string) =>
    (
      await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM approval_mails WHERE request_id = $1 AND kind = 'escalation'`,
        [requestId],
      )
    )[0].n;
  /** Exactly one escalation of `requestId`: one event, one audit entry, one mail per address, sent and received. */
  const assertEscalatedOnce = async (requestId: string) => {
    assert.equal((await escalationEvents(requestId)).length, 1, 'one request_escalated event');
    assert.equal((await auditEntries(requestId)).length, 1, 'one request_escalated audit entry');
    assert.equal(await escalationMailRows(requestId), 2, 'one escalation mail queued per address');
    const mails = await escalationMails(requestId);
    assert.deepEqual(mails.map((m) => m.to.join(',')).sort(), [BOSS, OPS], 'one mail received per address');
  };

  before(async () => {
    relay = await TestSmtpRelay.start();
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, secret, {
      ALCARTA_SMTP_RELAY_URL: relay.url,
      ALCARTA_SMTP_RETRY_BASE_SECONDS: '1',
      // The sweep's shortest interval (its minimum is 1 s).
      ALCARTA_EXPIRY_SWEEP_SECONDS: '1',
    });
    a = await replicas.start('A'); // alone first: it runs the migrations
    b = await replicas.start('B');
    mailboxId = await createMailbox(a.admin, `escalating-${process.pid}@example.com`);
    const put = await a.admin.request('PUT', `/v1/mailboxes/${mailboxId}/policy`, {
      approvers: [`email:${BOSS}`],
      escalate_after_seconds: ESCALATE_AFTER_SECONDS,
      escalate_to: [BOSS, OPS],
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
    await relay?.stop();
  });

  it('two replicas sweeping: escalated once, mailed once per address, recorded, shown; a parked wait does not return', async () => {
    const id = await newRequest(a, 'Ship release 5.0');
    const [row] = await db.query<{ after: number }>(
      `SELECT extract(epoch FROM escalate_at - created_at)::int AS after FROM approval_requests WHERE id = $1`,
      [id],
    );
    assert.equal(row.after, ESCALATE_AFTER_SECONDS, 'escalate_at is the policy’s time after creation');

    let returned = false;
    const parked = callOk(b.client, 'monitor_approval', { request_id: id, timeout_seconds: 300 }).then((r) => {
      returned = true;
      return r;
    });
    await waitFor('the request wait to be parked on B', async () => (await activeWaits(b.server.url, 'request')) === 1);

    await makeDue(id);
    const mails = await bothMailed(id);
    await sweptAgain([a, b]);
    await assertEscalatedOnce(id);
    const escalated =
      (await metricValue(a.server.url, 'alcarta_requests_escalated_total')) +
      (await metricValue(b.server.url, 'alcarta_requests_escalated_total'));
    assert.equal(escalated, 1, 'one replica escalated it, once');

    for (const mail of mails) {
      assert.equal(mail.subject, 'Escalated: Ship release 5.0');
      assert.match(mail.text, /Nobody decided this request .* within 1 minute\./);
      assert.match(mail.text, /Request: Ship release 5\.0/);
    }
    const bossMail = mails.find((m) => m.to.includes(BOSS))!;
    const opsMail = mails.find((m) => m.to.includes(OPS))!;
    const bossLink = /https?:\/\/\S+(\/console\/links\/[A-Za-z0-9_-]+)/.exec(bossMail.text)?.[1];
    assert.ok(bossLink, `the boss may decide by mail: a deciding link\n${bossMail.text}`);
    assert.doesNotMatch(opsMail.text, /\/console\/links\//, 'OPS may not decide: no deciding link');
    assert.match(opsMail.text, new RegExp(`/console/requests/${id}`));

    const [event] = await escalationEvents(id);
    const shown = await callOk(a.client, 'get_request', { request_id: id });
    assert.equal(shown.state, 'pending');
    assert.equal(typeof shown.escalated_at, 'string');
    assert.deepEqual(event.payload, {
      type: 'request_escalated',
      request_id: id,
      mailbox_id: mailboxId,
      escalated_at: shown.escalated_at,
      escalate_to: [BOSS, OPS],
    });
    const [entry] = await auditEntries(id);
    assert.deepEqual(entry.actor, { system: 'escalation' });
    assert.deepEqual(entry.subject, { request_id: id, mailbox_id: mailboxId, escalate_to: [BOSS, OPS] });

    // The console's request page says when it escalated.
    const approver = await createToken(a.admin, {
      name: 'console approver',
      scopes: ['approvals:read', 'approvals:decide'],
      mailboxes: [mailboxId],
    });
    const signedIn = await postSignIn(b.server.url, approver.secret);
    const cookie = signedIn.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const page = await fetch(`${b.server.url}/console/requests/${id}`, { headers: { cookie } });
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(
      html,
      new RegExp(`<dt>Escalated</dt><dd class="escalated-at">at <time datetime="${shown.escalated_at}">`),
    );

    // Escalation changed no state: the wait parked before is still parked, and returns on the decision.
    assert.equal(returned, false, 'monitor_approval did not return on the escalation');
    assert.equal(await activeWaits(b.server.url, 'request'), 1, 'the wait is still parked');
    const form = await fetch(b.server.url + bossLink);
    const hash = /name="content_sha256" value="([0-9a-f]{64})"/.exec(await form.text())?.[1];
    assert.ok(hash, 'the escalation link opens the confirmation page');
    const decided = await fetch(b.server.url + bossLink, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ decision: 'approved', content_sha256: hash }).toString(),
    });
    assert.equal(decided.status, 200, await decided.text());
    const result = await parked;
    assert.equal(result.timed_out, false);
    assert.equal((await callOk(a.client, 'get_request', { request_id: id })).state, 'approved');
  });

  it('SIGKILL after an escalation fired: the next process does not escalate it again', async () => {
    const id = await newRequest(a, 'Rotate the keys');
    await makeDue(id);
    await bothMailed(id);
    await replicas.stop(a, 'SIGKILL');
    await replicas.stop(b, 'SIGKILL');
    const c = await replicas.start('C');
    await sweptAgain([c]);
    await assertEscalatedOnce(id);
    assert.equal(await metricValue(c.server.url, 'alcarta_requests_escalated_total'), 0);
  });

  it('a request not yet due when its process is SIGKILLed escalates once on the next process', async () => {
    const [c] = replicas.running;
    const id = await newRequest(c, 'Renew the certificate');
    await replicas.stop(c, 'SIGKILL');
    const d = await replicas.start('D');
    await sweptAgain([d]);
    const [row] = await db.query<{ escalated_at: Date | null }>(
      `SELECT escalated_at FROM approval_requests WHERE id = $1`,
      [id],
    );
    assert.equal(row.escalated_at, null, 'not escalated before its time');
    assert.deepEqual(await escalationMails(id), []);

    await makeDue(id);
    await bothMailed(id);
    await sweptAgain([d]);
    await assertEscalatedOnce(id);
    assert.equal(await metricValue(d.server.url, 'alcarta_requests_escalated_total'), 1);
  });
});
