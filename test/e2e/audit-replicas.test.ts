import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../support/cli';
import { createTestDatabase, TestDatabase } from '../support/database';
import { mapInFlight } from '../support/in-flight';
import { callOk } from '../support/mcp';
import { Replica, ReplicaSet } from '../support/replicas';
import { createMailbox, randomSecret } from '../support/test-server';

const REPLICAS = 4;
const DECISIONS_PER_REPLICA = 500;
/** Calls each replica has in flight at once (so 400 across the four): see mapInFlight. */
const IN_FLIGHT_PER_REPLICA = 100;

/**
 * "The chain stays correct when many replicas append at once" (docs/audit.md): server processes on
 * one database create requests all at the same time, then decide them all at the same time (issue
 * 24: 4 replicas × 500 concurrent decisions), each act appending its entry in its own transaction;
 * `audit verify` then accepts one gapless chain with every act in it.
 */
describe('audit trail across server processes', () => {
  const secret = randomSecret();
  let db: TestDatabase;
  let replicas: ReplicaSet;
  const running: Replica[] = [];
  let mailboxId: string;

  before(async () => {
    db = await createTestDatabase();
    replicas = new ReplicaSet(db.url, secret, {
      ALCARTA_SMTP_PORT: 'off',
      ALCARTA_RATE_LIMIT_PER_SECOND: '0',
      ALCARTA_LOG_LEVEL: 'warn',
    });
    running.push(await replicas.start('A')); // alone first: it runs the migrations
    for (const name of ['B', 'C', 'D'].slice(0, REPLICAS - 1)) running.push(await replicas.start(name));
    mailboxId = await createMailbox(running[0].admin, `audit-replicas-${process.pid}@audit.example`);
  });

  after(async () => {
    await replicas?.stopAll();
    await db?.drop();
  });

  it(`keeps one verifiable chain through ${REPLICAS} × ${DECISIONS_PER_REPLICA} concurrent creations and decisions`, async (t) => {
    const started = performance.now();
    // Every replica asks for its requests at the same time (each creation appends `request_created`)...
    const created = await Promise.all(
      running.map((replica) =>
        mapInFlight(
          Array.from({ length: DECISIONS_PER_REPLICA }, (_, i) => i),
          IN_FLIGHT_PER_REPLICA,
          async (i) => {
            const request = await callOk<{ request_id: string }>(replica.client, 'request_approval', {
              mailbox_id: mailboxId,
              title: `Payment ${replica.name}-${i}`,
            });
            return request.request_id;
          },
        ),
      ),
    );
    const creatingMs = performance.now() - started;
    // ...then decides them, all four replicas at the same time with many decisions in flight on each,
    // so the four processes' transactions queue on the head lock against each other.
    const decidingStarted = performance.now();
    await Promise.all(
      running.map((replica, r) =>
        mapInFlight(created[r], IN_FLIGHT_PER_REPLICA, async (id, i) => {
          const res = await replica.admin.post(`/v1/requests/${id}/${i % 2 === 0 ? 'approve' : 'reject'}`, {});
          assert.equal(res.status, 200, JSON.stringify(res.body));
        }),
      ),
    );
    const decidingMs = performance.now() - decidingStarted;

    const counts = await db.query<{ action: string; n: string }>(
      `SELECT action, count(*) AS n FROM audit_log WHERE action LIKE 'request_%' GROUP BY action ORDER BY action`,
    );
    const total = REPLICAS * DECISIONS_PER_REPLICA;
    assert.deepEqual(
      counts.map((c) => [c.action, Number(c.n)]),
      [
        ['request_approved', total / 2],
        ['request_created', total],
        ['request_rejected', total / 2],
      ],
    );
    const verifyingStarted = performance.now();
    const verified = await runCli(db.url, 'audit', 'verify');
    const verifyingMs = performance.now() - verifyingStarted;
    assert.equal(verified.code, 0, verified.stdout + verified.stderr);
    const [{ n }] = await db.query<{ n: string }>(`SELECT count(*) AS n FROM audit_log`);
    assert.equal(verified.stdout.trim().split(' ')[1], n, 'every entry was checked');
    assert.equal(verified.stdout.trim(), `ok: ${n} entries verified (1..${n})`, 'one gapless chain from entry 1');
    t.diagnostic(
      `${total} creations ${creatingMs.toFixed(0)} ms, ${total} decisions ${decidingMs.toFixed(0)} ms ` +
        `(${((total / decidingMs) * 1000).toFixed(0)}/s), audit verify of ${n} entries ${verifyingMs.toFixed(0)} ms`,
    );
  });
});
