import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { callError, callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

type State = 'pending' | 'approved' | 'rejected' | 'expired' | 'cancelled';
interface RequestEvent {
  type: string;
  request_id: string;
  state: State;
  previous_state: State | null;
  changed_at: string;
}
interface RequestResult {
  matched: boolean;
  timed_out: boolean;
  shutdown: boolean;
  events: RequestEvent[];
  requests: Array<{ request_id: string; state: State }>;
}

/** Long enough for any wake-up on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 50;

/**
 * docs/agents.md "Waits" request waits through email_await and monitor_approval: level-triggered on
 * the truth, several ids, `states` and the terminal default (decisions, cancel, expiry), timeouts,
 * argument errors, visibility, and which token sees which wait tool.
 */
describe('request waits', () => {
  let server: TestServer;
  let agent: Client; // approvals:read + mail:read on mailbox M only
  let mailOnly: Client;
  let other: Client; // approvals:read on another mailbox
  let mailbox: string;
  let otherMailbox: string;

  const newRequest = async (client = agent, mailboxId = mailbox, extra: Record<string, unknown> = {}) =>
    (await callOk(client, 'request_approval', { mailbox_id: mailboxId, title: 'Ship release 4.2', ...extra }))
      .request_id as string;
  const decide = async (requestId: string, decision: 'approve' | 'reject') => {
    const res = await server.admin.post(`/v1/requests/${requestId}/${decision}`, { reason: 'tested' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  };
  const awaitRequests = (requestIds: string[], extra: Record<string, unknown> = {}) =>
    callOk<RequestResult>(agent, 'email_await', {
      event: { type: 'request_state_changed', request_ids: requestIds, ...extra },
      timeout_seconds: BLOCK,
    });
  const parked = () => waitFor('a parked request wait', async () => (await activeWaits(server.url, 'request')) === 1);
  /** The exact shape (docs/agents.md "Waits") of a matched request-wait result. */
  const assertMatched = (
    r: RequestResult,
    events: Array<[string, State, State | null]>,
    requests: Array<[string, State]>,
  ) => {
    for (const e of r.events) {
      assert.deepEqual(Object.keys(e).sort(), ['changed_at', 'previous_state', 'request_id', 'state', 'type']);
      assert.ok(!Number.isNaN(Date.parse(e.changed_at)), e.changed_at);
    }
    assert.deepEqual(
      { ...r, events: r.events.map((e) => [e.type, e.request_id, e.state, e.previous_state]) },
      {
        matched: true,
        timed_out: false,
        shutdown: false,
        events: events.map(([id, state, previous]) => ['request_state_changed', id, state, previous]),
        requests: requests.map(([request_id, state]) => ({ request_id, state })),
      },
    );
  };
  const invalid = async (client: Client, tool: string, args: Record<string, unknown>, reason: string) => {
    const err = await callError(client, tool, args);
    assert.equal(err.error, 'invalid_request', `${JSON.stringify(args)}: ${JSON.stringify(err)}`);
    assert.equal(err.reason, reason, JSON.stringify(args));
    return err;
  };
  const toolNames = async (client: Client) => (await client.listTools()).tools.map((t) => t.name);

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_EXPIRY_SWEEP_SECONDS: '1' } });
    [mailbox, otherMailbox] = await Promise.all([createMailbox(server.admin), createMailbox(server.admin)]);
    const agentToken = await createToken(server.admin, {
      scopes: ['approvals:read', 'mail:read'],
      mailboxes: [mailbox],
    });
    const mailToken = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
    const otherToken = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [otherMailbox] });
    agent = await connectMcp(server.url, agentToken.secret);
    mailOnly = await connectMcp(server.url, mailToken.secret);
    other = await connectMcp(server.url, otherToken.secret);
  });

  after(async () => {
    await Promise.all([agent, mailOnly, other].map((c) => c?.close()));
    await server?.close();
  });

  it('is level-triggered: a request already decided returns at once', async () => {
    const id = await newRequest();
    await decide(id, 'approve');
    const viaAwait = await awaitRequests([id]);
    assertMatched(viaAwait, [[id, 'approved', 'pending']], [[id, 'approved']]);
    const viaMonitor = await callOk(agent, 'monitor_approval', { request_id: id, timeout_seconds: BLOCK });
    assert.deepEqual(viaMonitor, viaAwait);
    assert.deepEqual(await callOk(agent, 'monitor_approval', { request_ids: [id], timeout_seconds: BLOCK }), viaAwait);
    const stored = await callOk(agent, 'get_request', { request_id: id });
    assert.equal(Date.parse(viaAwait.events[0].changed_at), Date.parse(stored.decided_at));
  });

  it('blocks on a pending request until it is approved through REST', async () => {
    const id = await newRequest();
    const pending = callOk<RequestResult>(agent, 'monitor_approval', { request_id: id, timeout_seconds: BLOCK });
    await parked();
    await decide(id, 'approve');
    assertMatched(await pending, [[id, 'approved', 'pending']], [[id, 'approved']]);
  });

  it('with several ids returns when any one reaches an awaited state, listing all', async () => {
    const [a, b, c] = [await newRequest(), await newRequest(), await newRequest()];
    const pending = awaitRequests([a, b, c]);
    await parked();
    await decide(b, 'reject');
    assertMatched(
      await pending,
      [[b, 'rejected', 'pending']],
      [
        [a, 'pending'],
        [b, 'rejected'],
        [c, 'pending'],
      ],
    );
  });

  it('states: ["pending"] returns at once for a pending request', async () => {
    const id = await newRequest();
    assertMatched(await awaitRequests([id], { states: ['pending'] }), [[id, 'pending', null]], [[id, 'pending']]);
  });

  it("a new request's request_created event wakes no wait and is in no result: waits see state changes only", async () => {
    const watched = await newRequest();
    const pending = awaitRequests([watched]);
    await parked();
    // A new request in the same mailbox appends request_created (and its own first state change).
    const created = await newRequest();
    const logged = await server.db.query<{ type: string }>(
      `SELECT type FROM events WHERE request_id = $1 ORDER BY id`,
      [created],
    );
    assert.deepEqual(
      logged.map((e) => e.type),
      ['request_created', 'request_state_changed'],
    );
    assert.equal(await activeWaits(server.url, 'request'), 1, 'the wait is still parked');
    // Its result, when it does end, holds the decision only, as before request_created existed.
    await decide(watched, 'reject');
    assertMatched(await pending, [[watched, 'rejected', 'pending']], [[watched, 'rejected']]);
    assertMatched(
      await awaitRequests([created], { states: ['pending'] }),
      [[created, 'pending', null]],
      [[created, 'pending']],
    );
  });

  it('states: ["rejected"] is not woken by an approval, only by a rejection', async () => {
    const [approved, rejected] = [await newRequest(), await newRequest()];
    const pending = awaitRequests([approved, rejected], { states: ['rejected'] });
    await parked();
    await decide(approved, 'approve');
    await decide(rejected, 'reject');
    assertMatched(
      await pending,
      [[rejected, 'rejected', 'pending']],
      [
        [approved, 'approved'],
        [rejected, 'rejected'],
      ],
    );
  });

  it('waits for the terminal states by default: cancel_request wakes it', async () => {
    const id = await newRequest();
    const pending = awaitRequests([id]);
    await parked();
    const cancelled = await callOk(agent, 'cancel_request', { request_id: id });
    assert.equal(cancelled.state, 'cancelled');
    assertMatched(await pending, [[id, 'cancelled', 'pending']], [[id, 'cancelled']]);
  });

  it('waits for the terminal states by default: expiry wakes it', async () => {
    const id = await newRequest(agent, mailbox, { expires_in_seconds: 1 });
    assertMatched(await awaitRequests([id]), [[id, 'expired', 'pending']], [[id, 'expired']]);
  });

  it('a timeout is a normal result carrying the current states', async () => {
    const id = await newRequest();
    const approved = await newRequest();
    await decide(approved, 'approve');
    for (const timeout_seconds of [1, 0]) {
      const result = await callOk<RequestResult>(agent, 'email_await', {
        event: { type: 'request_state_changed', request_ids: [id, approved], states: ['rejected'] },
        timeout_seconds,
      });
      assert.deepEqual(result, {
        matched: false,
        timed_out: true,
        shutdown: false,
        events: [],
        requests: [
          { request_id: id, state: 'pending' },
          { request_id: approved, state: 'approved' },
        ],
      });
    }
  });

  describe('errors', () => {
    it('rejects an empty or oversized request_ids', async () => {
      const id = await newRequest();
      const many = Array.from({ length: 101 }, (_, i) => (i === 0 ? id : `chk_${String(i).padStart(22, '0')}`));
      for (const request_ids of [[], many]) {
        await invalid(
          agent,
          'email_await',
          { event: { type: 'request_state_changed', request_ids } },
          'invalid_argument',
        );
        await invalid(agent, 'monitor_approval', { request_ids }, 'invalid_argument');
      }
    });

    it('rejects since_cursor on a request wait', async () => {
      const id = await newRequest();
      const cursor = (await callOk(agent, 'list_messages', { mailbox_id: mailbox })).next_cursor;
      await invalid(
        agent,
        'email_await',
        { event: { type: 'request_state_changed', request_ids: [id] }, since_cursor: cursor },
        'since_cursor_not_allowed',
      );
    });

    it("answers not_found for an unknown request and for another tenant's request", async () => {
      const own = await newRequest();
      const foreign = await newRequest(other, otherMailbox);
      for (const [ids, missing] of [
        [['chk_doesnotexist'], 'chk_doesnotexist'],
        [[foreign], foreign],
        [[own, foreign], foreign],
      ] as const) {
        const err = await callError(agent, 'email_await', {
          event: { type: 'request_state_changed', request_ids: ids },
        });
        assert.deepEqual([err.error, err.reason, err.id], ['not_found', 'request_not_found', missing]);
        const viaMonitor = await callError(agent, 'monitor_approval', { request_ids: ids });
        assert.deepEqual(viaMonitor, err);
      }
    });

    it('rejects timeout_seconds above 14400, never clamping it; 14400 and 301 are accepted', async () => {
      const id = await newRequest();
      for (const args of [
        { event: { type: 'request_state_changed', request_ids: [id] }, timeout_seconds: 14401 },
        { request_id: id, timeout_seconds: 14401 },
      ]) {
        const tool = 'event' in args ? 'email_await' : 'monitor_approval';
        const err = await invalid(agent, tool, args, 'timeout_exceeds_limit');
        assert.equal(err.max_timeout_seconds, 14400);
      }
      await decide(id, 'reject');
      for (const timeout_seconds of [14400, 301]) {
        const result = await callOk<RequestResult>(agent, 'monitor_approval', { request_id: id, timeout_seconds });
        assertMatched(result, [[id, 'rejected', 'pending']], [[id, 'rejected']]);
      }
    });

    it('monitor_approval needs exactly one of request_id and request_ids', async () => {
      const id = await newRequest();
      await invalid(agent, 'monitor_approval', { request_id: id, request_ids: [id] }, 'conflicting_arguments');
      await invalid(agent, 'monitor_approval', { timeout_seconds: 0 }, 'missing_argument');
    });

    it('a token without approvals:read gets invalid_request for a request wait and no monitor_approval', async () => {
      const id = await newRequest();
      const err = await invalid(
        mailOnly,
        'email_await',
        { event: { type: 'request_state_changed', request_ids: [id] } },
        'missing_scope',
      );
      assert.deepEqual(err.required_scopes, ['approvals:read']);
      const refused = await mailOnly.callTool({ name: 'monitor_approval', arguments: { request_id: id } }).then(
        () => assert.fail('monitor_approval succeeded without approvals:read'),
        (e: unknown) => e,
      );
      assert.ok(refused instanceof McpError, String(refused));
      assert.equal(refused.code, -32602, 'reported like an unknown tool');
    });
  });

  it('tools/list shows email_await for mail:read or approvals:read, monitor_inbox and monitor_approval by scope', async () => {
    const waitTools = (names: string[]) =>
      names.filter((n) => ['email_await', 'monitor_inbox', 'monitor_approval'].includes(n)).sort();
    assert.deepEqual(waitTools(await toolNames(mailOnly)), ['email_await', 'monitor_inbox']);
    assert.deepEqual(waitTools(await toolNames(other)), ['email_await', 'monitor_approval']);
    assert.deepEqual(waitTools(await toolNames(agent)), ['email_await', 'monitor_approval', 'monitor_inbox']);
    const sender = await createToken(server.admin, { scopes: ['mail:send'], mailboxes: [mailbox] });
    const client = await connectMcp(server.url, sender.secret);
    try {
      assert.deepEqual(waitTools(await toolNames(client)), []);
    } finally {
      await client.close();
    }
  });
});
