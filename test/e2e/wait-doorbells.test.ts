import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { DoorbellListener } from '#app/events/doorbell-listener.js';
import type { TestDatabase } from '../support/database';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** An id in the application's shape (prefix + 22 base62), for rows the tests write with SQL. */
function fakeId(prefix: string): string {
  const chars = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  return `${prefix}_${[...randomBytes(22)].map((b) => chars[b % 62]).join('')}`;
}

async function inTransaction(db: TestDatabase, work: () => Promise<void>): Promise<void> {
  await db.query('BEGIN');
  try {
    await work();
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK');
    throw err;
  }
}

/**
 * Commits an inbound message exactly as the ingest does (next mailbox position, message row,
 * message_received event), but without ringing the doorbell (no pg_notify). Returns its event.
 */
async function insertMessageSilently(db: TestDatabase, mailboxId: string, subject: string) {
  const id = fakeId('msg');
  const receivedAt = new Date().toISOString();
  const event = {
    type: 'message_received',
    mailbox_id: mailboxId,
    message_id: id,
    from: 'silent@example.org',
    subject,
    received_at: receivedAt,
    authentication: { spf: 'none', dkim: 'none', dmarc: 'none', arc: 'none' },
    from_verified: false,
  };
  await inTransaction(db, async () => {
    const [{ message_seq: seq }] = await db.query<{ message_seq: string }>(
      'UPDATE mailboxes SET message_seq = message_seq + 1 WHERE id = $1 RETURNING message_seq',
      [mailboxId],
    );
    await db.query(
      `INSERT INTO messages (id, mailbox_id, mailbox_seq, direction, from_address, to_addresses, cc_addresses,
                             subject, text_body, thread_id, received_at, authentication, from_verified)
       VALUES ($1, $2, $3, 'inbound', $4, ARRAY['agent@example.com'], '{}', $5, 'no doorbell', $6, $7, $8, $9)`,
      [id, mailboxId, seq, event.from, subject, fakeId('thr'), receivedAt, event.authentication, event.from_verified],
    );
    await db.query(`INSERT INTO events (type, mailbox_id, message_id, payload) VALUES ($1, $2, $3, $4)`, [
      event.type,
      mailboxId,
      id,
      JSON.stringify(event),
    ]);
  });
  return event;
}

/** Approves a pending request exactly as the REST decision does, but without ringing the doorbell. */
async function approveSilently(db: TestDatabase, requestId: string, mailboxId: string, tokenId: string) {
  const changedAt = new Date().toISOString();
  const event = {
    type: 'request_state_changed',
    request_id: requestId,
    state: 'approved',
    previous_state: 'pending',
    changed_at: changedAt,
  };
  await inTransaction(db, async () => {
    const updated = await db.query(
      `UPDATE approval_requests SET state = 'approved', decided_at = $2, decided_by = $3
        WHERE id = $1 AND state = 'pending' RETURNING id`,
      [requestId, changedAt, tokenId],
    );
    assert.equal(updated.length, 1, 'the request was pending');
    await db.query(`INSERT INTO events (type, mailbox_id, request_id, payload) VALUES ($1, $2, $3, $4)`, [
      event.type,
      mailboxId,
      requestId,
      JSON.stringify(event),
    ]);
  });
  return event;
}

/** A blocking call whose SDK request timeout outlasts the wait (the default is 60 s). */
async function blockingCall(client: Client, name: string, args: Record<string, unknown>): Promise<any> {
  const result = (await client.callTool({ name, arguments: args }, undefined, { timeout: 180_000 })) as CallToolResult;
  assert.notEqual(result.isError, true, `${name} failed: ${JSON.stringify(result.structuredContent)}`);
  return result.structuredContent;
}

/**
 * docs/operators.md "Replicas and shutdown", one engine: doorbells (LISTEN/NOTIFY) wake parked
 * waits, a lost listener connection reconnects and makes every waiter re-check the truth, a
 * periodic safety re-check bounds the delay of a lost doorbell, and a parked wait costs no database
 * queries while nothing happens.
 */
describe('wait engine doorbells', () => {
  const parked = (server: TestServer, n: number) =>
    waitFor(`${n} parked wait(s)`, async () => (await activeWaits(server.url)) === n, { timeoutMs: 30_000 });

  // One in-process server at a time (Nest's data source registry is process-wide).
  describe('with a 30 s safety re-check (anything faster is a doorbell or the reconnect)', () => {
    let slow: TestServer;
    let slowClient: Client;

    before(async () => {
      // No expiry sweeps either: the query-count test must see only what the waits cost.
      slow = await startTestServer({
        env: { ALCARTA_WAIT_RECHECK_SECONDS: '30', ALCARTA_EXPIRY_SWEEP_SECONDS: '3600' },
      });
      slowClient = await connectMcp(slow.url, slow.adminToken);
    });

    after(async () => {
      await slowClient?.close();
      await slow?.close();
    });

    it('a lost listener connection reconnects, and the parked waits re-check: nothing is missed', async () => {
      const mailboxId = await createMailbox(slow.admin);
      const listener = slow.running.app.get(DoorbellListener);
      const reconnectsBefore = listener.reconnects;
      const wait = blockingCall(slowClient, 'email_await', {
        event: { type: 'message_received', mailbox_id: mailboxId },
        timeout_seconds: 25,
      });
      await parked(slow, 1);

      const killed = await slow.db.query<{ ok: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
          WHERE application_name = 'alcarta-doorbell' AND datname = current_database()`,
      );
      assert.deepEqual(killed, [{ ok: true }], 'the server had one doorbell connection');
      const started = Date.now();
      // Committed at once: its NOTIFY may reach nobody, as the listener is being cut.
      const messageId = await ingest(slow.admin, mailboxId, { subject: 'during the cut' });

      const result = await wait;
      const elapsed = Date.now() - started;
      assert.equal(result.matched, true, `the wait missed the message: ${JSON.stringify(result)}`);
      assert.deepEqual(
        result.events.map((e: { message_id: string }) => e.message_id),
        [messageId],
      );
      assert.ok(elapsed < 10_000, `woken after ${elapsed} ms; the re-check interval is 30 s`);

      await waitFor('the listener to reconnect', () => listener.reconnects > reconnectsBefore);
      const ready = await waitFor('/health/ready to be 200 again', async () => {
        const res = await fetch(`${slow.url}/health/ready`);
        const body = (await res.json()) as { details: Record<string, { status: string }> };
        return res.status === 200 ? body : undefined;
      });
      assert.equal(ready.details.doorbell_listener.status, 'up');
      const listeners = await slow.db.query(
        `SELECT 1 FROM pg_stat_activity WHERE application_name = 'alcarta-doorbell' AND datname = current_database()`,
      );
      assert.equal(listeners.length, 1, 'one listener connection again');
    });

    it('50 parked waits cost no database queries: an idle 3 s window counts as many transactions as without them', async () => {
      const WINDOW_MS = 3000;

      /** Transactions of the test database so far, as PostgreSQL's statistics have them. */
      const transactions = async () => {
        await slow.db.query('SELECT pg_stat_clear_snapshot()');
        const [row] = await slow.db.query<{ n: string }>(
          `SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()`,
        );
        return Number(row.n);
      };
      /**
       * PostgreSQL publishes a busy connection's statistics up to 10 s after its last transaction,
       * so a window that starts earlier would count work done before it: wait until every
       * connection of the server has been idle for longer than that.
       */
      const settled = () =>
        waitFor(
          'the server connections to be idle for 11 s (parked waits must not keep them busy)',
          async () => {
            const [row] = await slow.db.query<{ idle: number | null }>(
              `SELECT extract(epoch FROM now() - max(state_change))::float8 AS idle FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
            );
            return row.idle === null || row.idle > 11;
          },
          { timeoutMs: 60_000, intervalMs: 250 },
        );
      /** Transactions counted in a quiet window (here the timed window is the measurement itself). */
      const measure = async () => {
        await settled();
        const first = await transactions();
        await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
        return (await transactions()) - first;
      };

      const mailboxId = await createMailbox(slow.admin);
      const baseline = await measure();

      const waits = Array.from({ length: 50 }, (_, i) =>
        blockingCall(slowClient, 'email_await', {
          event: i % 2 ? { type: 'message_received', mailbox_id: mailboxId } : { type: 'message_received' },
          timeout_seconds: 150,
        }),
      );
      await parked(slow, 50);
      const withWaits = await measure();
      assert.equal(await activeWaits(slow.url), 50, 'the waits stayed parked throughout');
      assert.ok(
        withWaits <= baseline + 10,
        `${withWaits} transactions with 50 parked waits, ${baseline} without: the waits query the database`,
      );

      // One doorbell then wakes all of them.
      const messageId = await ingest(slow.admin, mailboxId, { subject: 'wake everyone' });
      for (const result of await Promise.all(waits)) {
        assert.equal(result.matched, true);
        assert.deepEqual(
          result.events.map((e: { message_id: string }) => e.message_id),
          [messageId],
        );
      }
    });
  });

  describe('with a 1 s safety re-check', () => {
    let fast: TestServer;
    let fastClient: Client;

    before(async () => {
      fast = await startTestServer({ env: { ALCARTA_WAIT_RECHECK_SECONDS: '1' } });
      fastClient = await connectMcp(fast.url, fast.adminToken);
    });

    after(async () => {
      await fastClient?.close();
      await fast?.close();
    });

    it('wakes message waits on a change whose doorbell never rang', async () => {
      const mailboxId = await createMailbox(fast.admin);
      const earlier = await ingest(fast.admin, mailboxId, { subject: 'before the waits' });
      const oneMailbox = blockingCall(fastClient, 'email_await', {
        event: { type: 'message_received', mailbox_id: mailboxId },
        timeout_seconds: 30,
      });
      const everyMailbox = blockingCall(fastClient, 'email_await', {
        event: { type: 'message_received' },
        timeout_seconds: 30,
      });
      await parked(fast, 2);

      const started = Date.now();
      const event = await insertMessageSilently(fast.db, mailboxId, 'no doorbell for this one');
      for (const result of await Promise.all([oneMailbox, everyMailbox])) {
        assert.equal(result.matched, true, `not woken: ${JSON.stringify(result)}`);
        assert.deepEqual(result.events, [event], `only the new message, not ${earlier}`);
        assert.equal(typeof result.next_cursor, 'string');
      }
      const elapsed = Date.now() - started;
      assert.ok(elapsed < 15_000, `woken after ${elapsed} ms with a 1 s re-check`);
    });

    it('wakes request waits on a decision whose doorbell never rang', async () => {
      const mailboxId = await createMailbox(fast.admin);
      const { request_id: requestId } = await callOk(fastClient, 'request_approval', {
        mailbox_id: mailboxId,
        title: 'Decided behind the doorbell',
      });
      const tokens = await fast.admin.get('/v1/tokens');
      const wait = blockingCall(fastClient, 'monitor_approval', { request_id: requestId, timeout_seconds: 30 });
      await parked(fast, 1);

      const started = Date.now();
      const event = await approveSilently(fast.db, requestId, mailboxId, tokens.body.tokens[0].token_id);
      assert.deepEqual(await wait, {
        matched: true,
        timed_out: false,
        shutdown: false,
        events: [event],
        requests: [{ request_id: requestId, state: 'approved' }],
      });
      const elapsed = Date.now() - started;
      assert.ok(elapsed < 15_000, `woken after ${elapsed} ms with a 1 s re-check`);
    });
  });
});
