import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callError, callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { startTask, taskContent, taskResult } from '../support/tasks';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk } from '../support/wait-socket';

/** Long enough for any wake-up on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 50;
/** What every approval records when no relay is configured (docs/mail.md). */
const NOT_CONFIGURED = { status: 'not_configured', attempts: 0 };

interface DeliveryEvent {
  type: 'message_delivery_changed';
  mailbox_id: string;
  message_id: string;
  request_id: string;
  status: string;
  changed_at: string;
}

/**
 * docs/mail.md, what agents see of outbound delivery without a relay (ALCARTA_SMTP_RELAY_URL
 * unset): the `delivery` object on requests (get_request, cancel_request, REST list and decisions),
 * on the outbound message (get_message) and in the `requests` of request-wait results; and request
 * waits with `delivery_states` (blocking, level-triggered, the default states, persisted waits,
 * tasks, argument errors, the safety re-check).
 */
describe('delivery visibility (no relay)', () => {
  describe('with a 30 s safety re-check (anything faster is a doorbell)', () => {
    let server: TestServer;
    let agent: Client; // mail:send, mail:read, approvals:read on `mailbox`
    let mailbox: string;

    const sendEmail = async (subject = 'Quarterly numbers') =>
      (
        await callOk(agent, 'send_email', {
          mailbox_id: mailbox,
          to: ['cfo@example.org'],
          subject,
          text: 'Attached.',
        })
      ).request_id as string;
    const decide = async (requestId: string, decision: 'approve' | 'reject') => {
      const res = await server.admin.post(`/v1/requests/${requestId}/${decision}`, { reason: 'tested' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    };
    const parked = (delivery: 'poll' | 'persisted' = 'poll') =>
      waitFor(
        `a parked request wait (${delivery})`,
        async () => (await activeWaits(server.url, 'request', delivery)) === 1,
      );
    /** The exact event of a delivery that reached `status` for this approved request. */
    const assertDeliveryEvent = async (event: DeliveryEvent, requestId: string, status: string) => {
      const request = await callOk(agent, 'get_request', { request_id: requestId });
      assert.deepEqual(Object.keys(event).sort(), [
        'changed_at',
        'mailbox_id',
        'message_id',
        'request_id',
        'status',
        'type',
      ]);
      assert.deepEqual(
        { ...event, changed_at: undefined },
        {
          type: 'message_delivery_changed',
          mailbox_id: mailbox,
          message_id: request.sent_message_id,
          request_id: requestId,
          status,
          changed_at: undefined,
        },
      );
      assert.ok(!Number.isNaN(Date.parse(event.changed_at)), event.changed_at);
    };
    /** A matched result whose one event is the delivery's, with the request approved and not_configured. */
    const assertDeliveryMatch = async (result: any, requestId: string) => {
      assert.deepEqual(
        { ...result, events: result.events.map((e: DeliveryEvent) => e.type) },
        {
          matched: true,
          timed_out: false,
          shutdown: false,
          events: ['message_delivery_changed'],
          requests: [{ request_id: requestId, state: 'approved', delivery: NOT_CONFIGURED }],
        },
      );
      await assertDeliveryEvent(result.events[0], requestId, 'not_configured');
    };

    before(async () => {
      server = await startTestServer({
        ownPublicUrl: true,
        env: {
          ALCARTA_WAIT_RECHECK_SECONDS: '30',
          ALCARTA_SMTP_PORT: 'off',
          ALCARTA_SMTP_RELAY_URL: '',
          // Housekeeping every second, for the event retention test.
          ALCARTA_HOUSEKEEPING_SECONDS: '1',
        },
      });
      mailbox = await createMailbox(server.admin);
      const token = await createToken(server.admin, {
        scopes: ['mail:send', 'mail:read', 'approvals:read'],
        mailboxes: [mailbox],
      });
      agent = await connectMcp(server.url, token.secret);
    });

    after(async () => {
      await agent?.close();
      await server?.close();
    });

    it('an approved email shows delivery not_configured on the request, the REST list and decision, and the message', async () => {
      const id = await sendEmail();
      const pending = await callOk(agent, 'get_request', { request_id: id });
      assert.equal(pending.state, 'pending');
      assert.equal('delivery' in pending, false, 'nothing is queued before the approval');

      const approved = await decide(id, 'approve');
      assert.equal(approved.state, 'approved');
      assert.deepEqual(approved.delivery, NOT_CONFIGURED, 'the approve response');
      const viaMcp = await callOk(agent, 'get_request', { request_id: id });
      assert.deepEqual(viaMcp, approved, 'get_request shows the request as the decision returned it');
      assert.equal(typeof viaMcp.sent_message_id, 'string');

      const listed = await server.admin.get(`/v1/requests?mailbox_id=${mailbox}&state=approved`);
      assert.equal(listed.status, 200);
      assert.deepEqual(
        listed.body.requests.find((r: { request_id: string }) => r.request_id === id),
        viaMcp,
      );

      const message = await callOk(agent, 'get_message', { message_id: viaMcp.sent_message_id });
      assert.equal(message.direction, 'outbound');
      assert.deepEqual(message.delivery, NOT_CONFIGURED);

      const [event] = await server.db.query<{ payload: DeliveryEvent }>(
        `SELECT payload FROM events WHERE request_id = $1 AND type = 'message_delivery_changed'`,
        [id],
      );
      await assertDeliveryEvent(event.payload, id, 'not_configured');
    });

    it('the REST list shows each request with its own delivery, and none for requests without mail', async () => {
      const [sent, rejected, cancelled] = [await sendEmail('one'), await sendEmail('two'), await sendEmail('three')];
      const approval = (await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Go?' })).request_id;
      await decide(sent, 'approve');
      const rejectedView = await decide(rejected, 'reject');
      assert.equal('delivery' in rejectedView, false, 'a rejected email is never delivered');
      const cancelledView = await callOk(agent, 'cancel_request', { request_id: cancelled });
      assert.equal(cancelledView.state, 'cancelled');
      assert.equal('delivery' in cancelledView, false, 'a cancelled email is never delivered');
      await decide(approval, 'approve');

      const listed = await server.admin.get(`/v1/requests?mailbox_id=${mailbox}`);
      assert.equal(listed.status, 200);
      const byId = new Map<string, any>(listed.body.requests.map((r: { request_id: string }) => [r.request_id, r]));
      assert.deepEqual(byId.get(sent).delivery, NOT_CONFIGURED);
      for (const id of [rejected, cancelled, approval]) assert.equal('delivery' in byId.get(id), false, id);
      assert.deepEqual(byId.get(rejected), rejectedView);
      assert.deepEqual(byId.get(cancelled), cancelledView);
    });

    it('request-wait results carry the delivery in `requests`; a state match keeps its request_state_changed event', async () => {
      const [approved, pending] = [await sendEmail(), await sendEmail()];
      await decide(approved, 'approve');
      const result = await callOk(agent, 'monitor_approval', { request_ids: [approved, pending], timeout_seconds: 0 });
      assert.deepEqual(
        { ...result, events: result.events.map((e: { type: string; state: string }) => [e.type, e.state]) },
        {
          matched: true,
          timed_out: false,
          shutdown: false,
          events: [['request_state_changed', 'approved']],
          requests: [
            { request_id: approved, state: 'approved', delivery: NOT_CONFIGURED },
            { request_id: pending, state: 'pending' },
          ],
        },
      );
    });

    it('a blocked monitor_approval with delivery_states wakes on the approval with the delivery event', async () => {
      const id = await sendEmail();
      const pending = callOk(agent, 'monitor_approval', {
        request_id: id,
        delivery_states: ['not_configured'],
        timeout_seconds: BLOCK,
      });
      await parked();
      await decide(id, 'approve');
      await assertDeliveryMatch(await pending, id);
    });

    it('after the events of a request are pruned (docs/operators.md "Capacity"), request waits show the same latest events', async () => {
      const id = await sendEmail('Decided long ago');
      await decide(id, 'approve');
      const latest = async (type: string) =>
        (
          await server.db.query<{ payload: object }>(
            `SELECT payload FROM events WHERE request_id = $1 AND type = $2 ORDER BY id DESC LIMIT 1`,
            [id, type],
          )
        )[0].payload;
      const [transition, delivery] = [await latest('request_state_changed'), await latest('message_delivery_changed')];
      // Past the 30-day retention: housekeeping deletes them.
      await server.db.query(`UPDATE events SET created_at = now() - interval '40 days' WHERE request_id = $1`, [id]);
      await waitFor('the events of the request to be deleted', async () => {
        const [{ n }] = await server.db.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE request_id = $1`, [
          id,
        ]);
        return n === '0';
      });

      const byDelivery = await callOk(agent, 'monitor_approval', {
        request_id: id,
        delivery_states: ['not_configured'],
        timeout_seconds: 0,
      });
      await assertDeliveryMatch(byDelivery, id);
      assert.deepEqual(byDelivery.events, [delivery]);
      const byState = await callOk(agent, 'monitor_approval', { request_id: id, timeout_seconds: 0 });
      assert.equal(byState.matched, true);
      assert.deepEqual(byState.events, [transition]);
    });

    it('a blocked email_await with delivery_states wakes on the approval with the delivery event', async () => {
      const id = await sendEmail();
      const pending = callOk(agent, 'email_await', {
        event: { type: 'request_state_changed', request_ids: [id], delivery_states: ['not_configured', 'sent'] },
        timeout_seconds: BLOCK,
      });
      await parked();
      await decide(id, 'approve');
      const result = await pending;
      await assertDeliveryMatch(result, id);
      assert.deepEqual(
        await callOk(agent, 'email_await', {
          event: { type: 'request_state_changed', request_ids: [id], delivery_states: ['not_configured'] },
          timeout_seconds: BLOCK,
        }),
        result,
        'level-triggered: asked again afterwards, it returns the same at once',
      );
    });

    it('a delivery state not reached keeps the wait parked; the timeout result shows the delivery', async () => {
      const id = await sendEmail();
      await decide(id, 'approve');
      for (const timeout_seconds of [0, 1]) {
        const result = await callOk(agent, 'monitor_approval', {
          request_id: id,
          delivery_states: ['sent', 'failed', 'bounced'],
          timeout_seconds,
        });
        assert.deepEqual(result, {
          matched: false,
          timed_out: true,
          shutdown: false,
          events: [],
          requests: [{ request_id: id, state: 'approved', delivery: NOT_CONFIGURED }],
        });
      }
    });

    it('delivery_states without states ends on a rejection (at once when already rejected): no mail will be sent', async () => {
      const blocked = await sendEmail();
      const pending = callOk(agent, 'monitor_approval', {
        request_id: blocked,
        delivery_states: ['sent'],
        timeout_seconds: BLOCK,
      });
      await parked();
      await decide(blocked, 'reject');
      const assertRejected = (result: any, id: string) =>
        assert.deepEqual(
          {
            ...result,
            events: result.events.map((e: { type: string; request_id: string; state: string }) => [
              e.type,
              e.request_id,
              e.state,
            ]),
          },
          {
            matched: true,
            timed_out: false,
            shutdown: false,
            events: [['request_state_changed', id, 'rejected']],
            requests: [{ request_id: id, state: 'rejected' }],
          },
        );
      assertRejected(await pending, blocked);

      const rejected = await sendEmail();
      await decide(rejected, 'reject');
      assertRejected(
        await callOk(agent, 'email_await', {
          event: { type: 'request_state_changed', request_ids: [rejected], delivery_states: ['sent'] },
          timeout_seconds: BLOCK,
        }),
        rejected,
      );
      const cancelled = await sendEmail();
      const waitCancelled = callOk(agent, 'monitor_approval', {
        request_id: cancelled,
        delivery_states: ['sent'],
        timeout_seconds: BLOCK,
      });
      await parked();
      await callOk(agent, 'cancel_request', { request_id: cancelled });
      assert.deepEqual(
        (await waitCancelled).requests,
        [{ request_id: cancelled, state: 'cancelled' }],
        'cancel_request ends it too',
      );
    });

    it('explicit states with delivery_states: either matches, and a state match brings the transition', async () => {
      const id = await sendEmail();
      await decide(id, 'approve');
      const result = await callOk(agent, 'monitor_approval', {
        request_id: id,
        states: ['approved'],
        delivery_states: ['sent'],
        timeout_seconds: BLOCK,
      });
      assert.deepEqual(
        result.events.map((e: { type: string; state: string }) => [e.type, e.state]),
        [['request_state_changed', 'approved']],
      );
      assert.deepEqual(result.requests, [{ request_id: id, state: 'approved', delivery: NOT_CONFIGURED }]);
      const rejected = await sendEmail();
      await decide(rejected, 'reject');
      const timedOut = await callOk(agent, 'monitor_approval', {
        request_id: rejected,
        states: ['approved'],
        delivery_states: ['sent'],
        timeout_seconds: 0,
      });
      assert.equal(timedOut.timed_out, true, 'explicit states replace the default: a rejection is not awaited');
    });

    it('a persisted wait (wait_id and websocket) stores delivery_states and resolves on the delivery', async () => {
      const id = await sendEmail();
      const created = await callOk(agent, 'email_await', {
        event: { type: 'request_state_changed', request_ids: [id], delivery_states: ['not_configured'] },
        timeout_seconds: 120,
        delivery: 'websocket',
      });
      assert.equal(created.delivery, 'websocket');
      const [row] = await server.db.query<{ spec: unknown }>('SELECT spec FROM waits WHERE id = $1', [created.wait_id]);
      assert.deepEqual(row.spec, {
        kind: 'request',
        request_ids: [id],
        states: ['rejected', 'expired', 'cancelled'],
        delivery_states: ['not_configured'],
      });
      const pendingPoll = await callOk(agent, 'email_await', { wait_id: created.wait_id, timeout_seconds: 0 });
      assert.deepEqual(pendingPoll.requests, [{ request_id: id, state: 'pending' }]);

      const polled = callOk(agent, 'email_await', { wait_id: created.wait_id, timeout_seconds: BLOCK });
      await parked();
      await decide(id, 'approve');
      const result = await polled;
      await assertDeliveryMatch(result, id);

      const socket = await openOk(created.websocket_url);
      assert.equal((await socket.closed).code, 1000);
      const { type, ...delivered } = socket.frames[1];
      assert.equal(type, 'result');
      assert.deepEqual(delivered, result, 'the socket delivers the same result');
    });

    it('a task with delivery_states stores them and completes on the delivery', async () => {
      const id = await sendEmail();
      const task = await startTask(agent, 'monitor_approval', {
        request_id: id,
        delivery_states: ['not_configured'],
        timeout_seconds: 300,
      });
      const [row] = await server.db.query<{ spec: unknown }>(
        'SELECT w.spec FROM tasks t JOIN waits w ON w.id = t.wait_id WHERE t.id = $1',
        [task.taskId],
      );
      assert.deepEqual(row.spec, {
        kind: 'request',
        request_ids: [id],
        states: ['rejected', 'expired', 'cancelled'],
        delivery_states: ['not_configured'],
      });
      await parked('persisted');
      await decide(id, 'approve');
      await assertDeliveryMatch(taskContent(await taskResult(agent, task.taskId), task.taskId), id);
    });

    it('a stored request wait without delivery_states stores none (the form older replicas wrote)', async () => {
      const id = await sendEmail();
      const created = await callOk(agent, 'monitor_approval', { request_id: id, timeout_seconds: 60, delivery: 'any' });
      const [row] = await server.db.query<{ spec: unknown }>('SELECT spec FROM waits WHERE id = $1', [created.wait_id]);
      assert.deepEqual(row.spec, {
        kind: 'request',
        request_ids: [id],
        states: ['approved', 'rejected', 'expired', 'cancelled'],
      });
      await decide(id, 'approve');
      const result = await callOk(agent, 'email_await', { wait_id: created.wait_id, timeout_seconds: BLOCK });
      assert.deepEqual(
        result.events.map((e: { type: string }) => e.type),
        ['request_state_changed'],
      );
      assert.deepEqual(result.requests, [{ request_id: id, state: 'approved', delivery: NOT_CONFIGURED }]);
    });

    describe('errors', () => {
      const invalid = async (tool: string, args: Record<string, unknown>, reason: string) => {
        const err = await callError(agent, tool, args);
        assert.deepEqual([err.error, err.reason], ['invalid_request', reason], JSON.stringify(args));
        return err;
      };

      it('rejects an empty delivery_states and unknown delivery states', async () => {
        const id = await sendEmail();
        for (const delivery_states of [[], ['delivered'], ['sent', 'approved'], 'sent']) {
          await invalid(
            'email_await',
            { event: { type: 'request_state_changed', request_ids: [id], delivery_states } },
            'invalid_argument',
          );
          await invalid('monitor_approval', { request_id: id, delivery_states }, 'invalid_argument');
        }
      });

      it('rejects delivery_states on message waits', async () => {
        const err = await invalid(
          'email_await',
          { event: { type: 'message_received', mailbox_id: mailbox, delivery_states: ['sent'] } },
          'conflicting_arguments',
        );
        assert.equal(err.argument, 'event.delivery_states');
        await invalid('monitor_inbox', { mailbox_id: mailbox, delivery_states: ['sent'] }, 'unknown_argument');
      });
    });

    it('email_await and monitor_approval describe delivery_states in their schemas', async () => {
      const { tools } = await agent.listTools();
      const schemaOf = (name: string) => tools.find((t) => t.name === name)!.inputSchema as any;
      const statuses = ['queued', 'sending', 'sent', 'retrying', 'failed', 'bounced', 'not_configured'];
      const fromAwait = schemaOf('email_await').properties.event.properties.delivery_states;
      const fromMonitor = schemaOf('monitor_approval').properties.delivery_states;
      for (const schema of [fromAwait, fromMonitor]) {
        assert.equal(schema.type, 'array');
        assert.deepEqual(schema.items.enum, statuses);
        assert.equal(schema.minItems, 1);
        assert.match(schema.description, /rejected, expired, cancelled/);
      }
    });
  });

  describe('with a 1 s safety re-check', () => {
    let server: TestServer;
    let agent: Client;
    let mailbox: string;

    before(async () => {
      server = await startTestServer({
        env: { ALCARTA_WAIT_RECHECK_SECONDS: '1', ALCARTA_SMTP_PORT: 'off', ALCARTA_SMTP_RELAY_URL: '' },
      });
      mailbox = await createMailbox(server.admin);
      const token = await createToken(server.admin, {
        scopes: ['mail:send', 'mail:read', 'approvals:read'],
        mailboxes: [mailbox],
      });
      agent = await connectMcp(server.url, token.secret);
    });

    after(async () => {
      await agent?.close();
      await server?.close();
    });

    it('a delivery status change whose doorbell was lost is found by the safety re-check', async () => {
      const { request_id: id } = await callOk(agent, 'send_email', {
        mailbox_id: mailbox,
        to: ['cfo@example.org'],
        subject: 'Numbers',
        text: 'Attached.',
      });
      const approved = await server.admin.post(`/v1/requests/${id}/approve`, {});
      assert.equal(approved.status, 200);
      const messageId = approved.body.sent_message_id as string;
      const pending = callOk(agent, 'monitor_approval', {
        request_id: id,
        delivery_states: ['sent'],
        timeout_seconds: BLOCK,
      });
      await waitFor('a parked request wait', async () => (await activeWaits(server.url, 'request')) === 1);

      // What a sending replica commits, without its doorbell (no pg_notify): only the re-check can see it.
      const sentAt = new Date();
      const event = {
        type: 'message_delivery_changed',
        mailbox_id: mailbox,
        message_id: messageId,
        request_id: id,
        status: 'sent',
        changed_at: sentAt.toISOString(),
      };
      await server.db.query('BEGIN');
      await server.db.query(
        `UPDATE outbound_deliveries SET status = 'sent', attempts = 1, last_attempt_at = $2,
                response = '250 2.0.0 Ok: queued', updated_at = $2 WHERE message_id = $1`,
        [messageId, sentAt],
      );
      await server.db.query(
        `INSERT INTO events (type, mailbox_id, message_id, request_id, payload) VALUES ($1, $2, $3, $4, $5)`,
        [event.type, mailbox, messageId, id, JSON.stringify(event)],
      );
      await server.db.query('COMMIT');

      assert.deepEqual(await pending, {
        matched: true,
        timed_out: false,
        shutdown: false,
        events: [event],
        requests: [
          {
            request_id: id,
            state: 'approved',
            delivery: {
              status: 'sent',
              attempts: 1,
              last_attempt_at: sentAt.toISOString(),
              response: '250 2.0.0 Ok: queued',
            },
          },
        ],
      });
      const request = await callOk(agent, 'get_request', { request_id: id });
      assert.deepEqual(request.delivery, (await pending).requests[0].delivery, 'get_request agrees');
    });
  });
});
