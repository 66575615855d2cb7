import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callError, callOk, connectMcp } from '../support/mcp';
import type { RestClient, RestResponse } from '../support/rest';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const DAY_MS = 24 * 3600 * 1000;
const EVENT_FIELDS = ['changed_at', 'previous_state', 'request_id', 'state', 'type'];
const REQUEST_FIELDS = [
  'content_sha256',
  'created_at',
  'details',
  'expires_at',
  'kind',
  'mailbox_id',
  'request_id',
  'state',
  'title',
];

/** A request as get_request and the REST API show it: every field is a string (docs/agents.md "Tools"). */
type RequestView = Record<string, string>;

const near = (iso: string, expectedMs: number, toleranceMs = 60_000) =>
  Math.abs(Date.parse(iso) - expectedMs) < toleranceMs;

/**
 * Request states (docs/agents.md "Concepts"), the request tools (docs/agents.md "Tools") and REST
 * decisions (docs/rest-api.md): creation, listing, approve / reject / cancel, conflicts on terminal
 * requests, concurrent decisions, send_email recording the outbound message on approval only,
 * expiry by the sweeper, and the event log rows behind waits.
 */
describe('approval requests', () => {
  let server: TestServer;
  let agent: Client;
  let agentTokenId: string;
  let ingester: RestClient;
  let decider: RestClient;
  let deciderTokenId: string;

  const getRequest = (requestId: string) => callOk<RequestView>(agent, 'get_request', { request_id: requestId });
  const requestApproval = (mailboxId: string, extra: Record<string, unknown> = {}) =>
    callOk<{ request_id: string; state: string; expires_at: string }>(agent, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Pay invoice 42',
      ...extra,
    });
  const decide = (requestId: string, decision: 'approve' | 'reject', body: unknown = {}) =>
    decider.post(`/v1/requests/${requestId}/${decision}`, body);
  type Summary = { message_id: string; direction: string; from: string; to: string[]; subject: string };
  const listMessages = async (mailboxId: string): Promise<Summary[]> =>
    (await callOk(agent, 'list_messages', { mailbox_id: mailboxId, limit: 100 })).messages;
  /** The request_state_changed payloads of one request, oldest first. */
  const stateEvents = async (requestId: string) =>
    (
      await server.db.query<{ payload: Record<string, unknown> }>(
        `SELECT payload FROM events WHERE type = 'request_state_changed' AND request_id = $1 ORDER BY id`,
        [requestId],
      )
    ).map((r) => r.payload);
  /** Exactly these states were logged, in order, each event with the documented shape and its previous state. */
  const assertStates = async (requestId: string, ...states: string[]) => {
    const events = await stateEvents(requestId);
    const logged = events.map((e) => e.state);
    assert.deepEqual(logged, states);
    events.forEach((event, i) => {
      assert.deepEqual(Object.keys(event).sort(), EVENT_FIELDS);
      assert.equal(event.type, 'request_state_changed');
      assert.equal(event.request_id, requestId);
      assert.equal(event.previous_state, i === 0 ? null : states[i - 1]);
      assert.ok(!Number.isNaN(Date.parse(event.changed_at as string)));
    });
    return events;
  };
  const ids = (requests: RequestView[]) => requests.map((r) => r.request_id);
  /** A REST decision refused with 409 conflict, naming the state the request is in. */
  const assertConflict = (res: RestResponse, state: string, what = '') => {
    assert.equal(res.status, 409, what);
    assert.equal(res.body.error, 'conflict', what);
    assert.equal(res.body.state, state, what);
  };

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_EXPIRY_SWEEP_SECONDS: '1' } });
    const agentToken = await createToken(server.admin, {
      scopes: ['mail:read', 'mail:send', 'approvals:read', 'mail:ingest'],
      mailboxes: ['*'],
    });
    agentTokenId = agentToken.id;
    ingester = server.admin.withToken(agentToken.secret);
    agent = await connectMcp(server.url, agentToken.secret);
    const deciderToken = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: ['*'] });
    deciderTokenId = deciderToken.id;
    decider = server.admin.withToken(deciderToken.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  it('request_approval creates a pending chk_ request that get_request shows with exactly the documented fields', async () => {
    const mailboxId = await createMailbox(server.admin);
    const created = await requestApproval(mailboxId, { details: 'Invoice 42 from ACME, 1,200 EUR.' });
    assert.deepEqual(Object.keys(created).sort(), ['expires_at', 'request_id', 'state']);
    assert.match(created.request_id, /^chk_[0-9A-Za-z]+$/);
    assert.equal(created.state, 'pending');
    assert.ok(near(created.expires_at, Date.now() + DAY_MS), `default expiry is 24 h: ${created.expires_at}`);

    const request = await getRequest(created.request_id);
    assert.deepEqual(Object.keys(request).sort(), REQUEST_FIELDS);
    assert.equal(request.request_id, created.request_id);
    assert.equal(request.mailbox_id, mailboxId);
    assert.equal(request.kind, 'approval');
    assert.equal(request.state, 'pending');
    assert.equal(request.title, 'Pay invoice 42');
    assert.equal(request.details, 'Invoice 42 from ACME, 1,200 EUR.');
    assert.equal(request.expires_at, created.expires_at);
    assert.ok(near(request.created_at, Date.now()));
    assert.ok(near(request.expires_at, Date.parse(request.created_at) + DAY_MS, 5000), '24 h after creation');

    const withoutDetails = await getRequest((await requestApproval(mailboxId)).request_id);
    assert.equal('details' in withoutDetails, false, 'an absent optional field is left out');

    const [event] = await assertStates(created.request_id, 'pending');
    assert.equal(event.changed_at, request.created_at);
  });

  it('GET /v1/requests lists requests newest first, filtered by state and mailbox_id', async () => {
    const [a, b] = [await createMailbox(server.admin), await createMailbox(server.admin)];
    const r1 = (await requestApproval(a, { title: 'first' })).request_id;
    const r2 = (await requestApproval(b, { title: 'second' })).request_id;
    const r3 = (await requestApproval(a, { title: 'third' })).request_id;
    const decided = (await requestApproval(a, { title: 'decided' })).request_id;
    assert.equal((await decide(decided, 'approve')).status, 200);

    const inA = await decider.get(`/v1/requests?state=pending&mailbox_id=${a}`);
    assert.equal(inA.status, 200);
    assert.deepEqual(ids(inA.body.requests), [r3, r1]);
    assert.deepEqual(inA.body.requests[0], await getRequest(r3), 'each entry is as get_request shows it');

    const pending = await decider.get('/v1/requests?state=pending');
    const ours = ids(pending.body.requests).filter((id) => [r1, r2, r3].includes(id));
    assert.deepEqual(ours, [r3, r2, r1]);
    assert.ok(pending.body.requests.every((r: RequestView) => r.state === 'pending'));

    const approved = await decider.get(`/v1/requests?state=approved&mailbox_id=${a}`);
    assert.deepEqual(ids(approved.body.requests), [decided]);
    const all = await decider.get(`/v1/requests?mailbox_id=${a}`);
    assert.deepEqual(ids(all.body.requests), [decided, r3, r1]);

    const badState = await decider.get('/v1/requests?state=done');
    assert.equal(badState.status, 400);
    assert.equal(badState.body.error, 'invalid_request');
    const unknownMailbox = await decider.get('/v1/requests?mailbox_id=mbx_doesNotExist');
    assert.equal(unknownMailbox.status, 404);
    assert.equal(unknownMailbox.body.error, 'not_found');
  });

  it('approve records decided_at, decided_by and reason; a terminal request then answers conflict and stays put', async () => {
    const mailboxId = await createMailbox(server.admin);
    const { request_id: id } = await requestApproval(mailboxId);
    const res = await decide(id, 'approve', { reason: 'Budget confirmed' });
    assert.equal(res.status, 200);
    assert.equal(res.body.state, 'approved');
    assert.equal(res.body.reason, 'Budget confirmed');
    assert.equal(res.body.decided_by, deciderTokenId);
    assert.ok(near(res.body.decided_at, Date.now()));
    const after = await getRequest(id);
    assert.deepEqual(after, res.body);

    for (const decision of ['approve', 'reject'] as const) {
      assertConflict(await decide(id, decision, { reason: 'too late' }), 'approved', decision);
    }
    const cancel = await callError(agent, 'cancel_request', { request_id: id });
    assert.equal(cancel.error, 'conflict');
    assert.deepEqual(await getRequest(id), after, 'a refused decision changes nothing');

    const [, event] = await assertStates(id, 'pending', 'approved');
    assert.equal(event.changed_at, after.decided_at);
  });

  it('reject (also without a body) and cancel_request end a pending request, and it stays ended', async () => {
    const mailboxId = await createMailbox(server.admin);
    const rejectedId = (await requestApproval(mailboxId)).request_id;
    const rejected = await decider.post(`/v1/requests/${rejectedId}/reject`);
    assert.equal(rejected.status, 200, JSON.stringify(rejected.body));
    assert.equal(rejected.body.state, 'rejected');
    assert.equal(rejected.body.decided_by, deciderTokenId);
    assert.equal('reason' in rejected.body, false);
    const withReason = (await requestApproval(mailboxId)).request_id;
    assert.equal((await decide(withReason, 'reject', { reason: 'Not in budget' })).body.reason, 'Not in budget');

    const cancelledId = (await requestApproval(mailboxId)).request_id;
    const cancelled = await callOk<RequestView>(agent, 'cancel_request', { request_id: cancelledId });
    assert.equal(cancelled.request_id, cancelledId);
    assert.equal(cancelled.state, 'cancelled');
    assert.equal(cancelled.decided_by, agentTokenId);
    assert.ok(cancelled.decided_at);
    assert.deepEqual(await getRequest(cancelledId), cancelled);

    for (const id of [rejectedId, cancelledId]) {
      const before = await getRequest(id);
      assertConflict(await decide(id, 'approve'), before.state);
      assert.equal((await callError(agent, 'cancel_request', { request_id: id })).error, 'conflict');
      assert.deepEqual(await getRequest(id), before);
    }
    await assertStates(rejectedId, 'pending', 'rejected');
    await assertStates(cancelledId, 'pending', 'cancelled');

    assert.equal((await callError(agent, 'get_request', { request_id: 'chk_doesNotExist' })).error, 'not_found');
    assert.equal((await callError(agent, 'cancel_request', { request_id: 'chk_doesNotExist' })).error, 'not_found');
    assert.equal((await decide('chk_doesNotExist', 'approve')).status, 404);
  });

  it('10 simultaneous decisions on one request: exactly one wins, the rest get 409, one transition is logged', async () => {
    const mailboxId = await createMailbox(server.admin);
    const { request_id: id } = await requestApproval(mailboxId);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => decide(id, i % 2 === 0 ? 'approve' : 'reject', { reason: `#${i}` })),
    );
    const winners = results.filter((r) => r.status === 200);
    assert.equal(winners.length, 1, `statuses: ${results.map((r) => r.status).join(',')}`);
    assert.equal(results.filter((r) => r.status === 409 && r.body.error === 'conflict').length, 9);
    const final = await getRequest(id);
    assert.equal(final.state, winners[0].body.state);
    assert.equal(final.reason, winners[0].body.reason);
    await assertStates(id, 'pending', final.state);
  });

  describe('send_email', () => {
    it('records nothing until approved, then the outbound message from the mailbox address', async () => {
      const address = `sender-${Date.now()}@example.com`;
      const mailboxId = await createMailbox(server.admin, address);
      const created = await callOk(agent, 'send_email', {
        mailbox_id: mailboxId,
        to: ['customer@example.org', 'second@example.org'],
        cc: ['manager@example.org'],
        subject: 'Your order',
        text: 'It ships tomorrow.',
        html: '<p>It ships tomorrow.</p>',
      });
      assert.deepEqual(Object.keys(created).sort(), ['expires_at', 'request_id', 'sanitized', 'state']);
      assert.match(created.request_id, /^chk_/);
      assert.equal(created.state, 'pending');
      assert.equal((await getRequest(created.request_id)).kind, 'send_email');
      assert.deepEqual(await listMessages(mailboxId), [], 'nothing is recorded before approval');

      assert.equal((await decide(created.request_id, 'approve')).status, 200);
      const messages = await listMessages(mailboxId);
      assert.equal(messages.length, 1);
      const [sent] = messages;
      assert.equal(sent.direction, 'outbound');
      assert.equal(sent.from, address);
      assert.deepEqual(sent.to, ['customer@example.org', 'second@example.org']);
      assert.equal(sent.subject, 'Your order');
      const message = await callOk(agent, 'get_message', { message_id: sent.message_id });
      assert.deepEqual(message.cc, ['manager@example.org']);
      assert.equal(message.text, 'It ships tomorrow.');
      assert.equal(message.html, '<p>It ships tomorrow.</p>');
      assert.equal(message.in_reply_to, null);
      assert.equal(typeof message.thread_id, 'string');
    });

    it('a reply joins the thread of in_reply_to_message_id and names its Message-ID', async () => {
      const mailboxId = await createMailbox(server.admin);
      const header = `<question-${Date.now()}@example.org>`;
      const inboundId = await ingest(ingester, mailboxId, { message_id_header: header, subject: 'Question' });
      const inbound = await callOk(agent, 'get_message', { message_id: inboundId });
      const { request_id: id } = await callOk(agent, 'send_email', {
        mailbox_id: mailboxId,
        to: ['sender@example.org'],
        subject: 'Re: Question',
        text: 'Answer.',
        in_reply_to_message_id: inboundId,
      });
      assert.equal((await decide(id, 'approve')).status, 200);
      const outbound = (await listMessages(mailboxId)).find((m) => m.direction === 'outbound');
      assert.ok(outbound, 'the approved reply is in the mailbox');
      const reply = await callOk(agent, 'get_message', { message_id: outbound.message_id });
      assert.equal(reply.thread_id, inbound.thread_id);
      assert.equal(reply.in_reply_to, header);
    });

    it('a rejected or cancelled send_email records nothing', async () => {
      const mailboxId = await createMailbox(server.admin);
      const draft = { mailbox_id: mailboxId, to: ['x@example.org'], subject: 'Never', text: 'Never sent.' };
      const rejected = (await callOk(agent, 'send_email', draft)).request_id;
      const cancelled = (await callOk(agent, 'send_email', draft)).request_id;
      assert.equal((await decide(rejected, 'reject')).status, 200);
      assert.equal((await callOk(agent, 'cancel_request', { request_id: cancelled })).state, 'cancelled');
      assert.deepEqual(await listMessages(mailboxId), []);
      const rows = await server.db.query('SELECT id FROM messages WHERE mailbox_id = $1', [mailboxId]);
      assert.equal(rows.length, 0);
    });

    it('refuses an unknown or foreign in_reply_to_message_id and invalid addresses', async () => {
      const mailboxId = await createMailbox(server.admin);
      const otherMailboxId = await createMailbox(server.admin);
      const foreign = await ingest(ingester, otherMailboxId);
      const draft = { mailbox_id: mailboxId, to: ['x@example.org'], subject: 'S', text: 'T' };
      for (const replyTo of ['msg_doesNotExist', foreign]) {
        const err = await callError(agent, 'send_email', { ...draft, in_reply_to_message_id: replyTo });
        assert.equal(err.error, 'not_found', replyTo);
      }
      for (const bad of [{ to: ['not an address'] }, { to: [] }, { to: 'x@example.org' }, { cc: ['nope'] }]) {
        const err = await callError(agent, 'send_email', { ...draft, ...bad });
        assert.equal(err.error, 'invalid_request', JSON.stringify(bad));
      }
      const unknownMailbox = await callError(agent, 'send_email', { ...draft, mailbox_id: 'mbx_doesNotExist' });
      assert.equal(unknownMailbox.error, 'not_found');
      const rows = await server.db.query('SELECT id FROM approval_requests WHERE mailbox_id = $1', [mailboxId]);
      assert.equal(rows.length, 0, 'a refused send_email creates no request');
    });
  });

  describe('expiry', () => {
    it('the sweeper expires an overdue pending request without anyone reading it', async () => {
      const mailboxId = await createMailbox(server.admin);
      const { request_id: id, expires_at } = await requestApproval(mailboxId, { expires_in_seconds: 1 });
      assert.ok(near(expires_at, Date.now() + 1000, 30_000));
      const expired = await waitFor(
        'the request to be listed as expired',
        async () => {
          const res = await decider.get(`/v1/requests?state=expired&mailbox_id=${mailboxId}`);
          return res.body.requests.find((r: RequestView) => r.request_id === id) as RequestView | undefined;
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      assert.equal(expired.state, 'expired');
      assert.ok(expired.decided_at);
      assert.equal('decided_by' in expired, false, 'nobody decided an expiry');
      await assertStates(id, 'pending', 'expired');
    });

    it('an approval after the deadline is refused with 409 and the request reads expired', async () => {
      const mailboxId = await createMailbox(server.admin);
      const { request_id: id, expires_at } = await requestApproval(mailboxId, { expires_in_seconds: 1 });
      await waitFor('the deadline to pass', () => Date.now() > Date.parse(expires_at) + 50, { timeoutMs: 30_000 });
      assertConflict(await decide(id, 'approve', { reason: 'late' }), 'expired');
      const request = await getRequest(id);
      assert.equal(request.state, 'expired');
      assert.equal('reason' in request, false);
      await assertStates(id, 'pending', 'expired');
    });

    it('expires_in_seconds must be 1 to 604800', async () => {
      const mailboxId = await createMailbox(server.admin);
      const max = await requestApproval(mailboxId, { expires_in_seconds: 604_800 });
      assert.ok(near(max.expires_at, Date.now() + 7 * DAY_MS));
      for (const tool of ['request_approval', 'send_email'] as const) {
        const args =
          tool === 'request_approval'
            ? { mailbox_id: mailboxId, title: 'T' }
            : { mailbox_id: mailboxId, to: ['x@example.org'], subject: 'S', text: 'T' };
        const tooLong = await callError(agent, tool, { ...args, expires_in_seconds: 604_801 });
        assert.equal(tooLong.error, 'invalid_request', tool);
        assert.equal(tooLong.reason, 'expiry_exceeds_limit', tool);
        for (const value of [0, -5, 1.5]) {
          const err = await callError(agent, tool, { ...args, expires_in_seconds: value });
          assert.equal(err.error, 'invalid_request', `${tool} ${value}`);
        }
      }
      const rows = await server.db.query('SELECT id FROM approval_requests WHERE mailbox_id = $1', [mailboxId]);
      assert.deepEqual(rows, [{ id: max.request_id }]);
    });
  });

  it('each ingest appends one message_received event (a duplicate none)', async () => {
    const mailboxId = await createMailbox(server.admin);
    const header = `<event-${Date.now()}@example.org>`;
    const messageId = await ingest(ingester, mailboxId, { message_id_header: header, subject: 'Ping' });
    await ingest(ingester, mailboxId, { message_id_header: header, subject: 'Ping' });
    const second = await ingest(ingester, mailboxId, { subject: 'Pong' });
    const rows = await server.db.query<{ payload: Record<string, unknown> }>(
      `SELECT payload FROM events WHERE type = 'message_received' AND mailbox_id = $1 ORDER BY id`,
      [mailboxId],
    );
    const expected = async (id: string, subject: string) => ({
      type: 'message_received',
      mailbox_id: mailboxId,
      message_id: id,
      from: 'sender@example.org',
      subject,
      received_at: (await callOk(agent, 'get_message', { message_id: id })).received_at,
      // JSON ingest: nothing to check (docs/mail.md).
      authentication: { spf: 'none', dkim: 'none', dmarc: 'none', arc: 'none' },
      from_verified: false,
    });
    const payloads = rows.map((r) => r.payload);
    assert.deepEqual(payloads, [await expected(messageId, 'Ping'), await expected(second, 'Pong')]);
  });
});
