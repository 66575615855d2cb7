import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { rawMcp } from '../support/mcp';
import { callOk2026, connectMcp2026, envelope, revision2026Headers } from '../support/mcp-2026';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const EVENTS = 'io.modelcontextprotocol/events';
const DECLARES_EVENTS = { extensions: { [EVENTS]: {} } };
const anyResult = z.looseObject({});

interface PollResult {
  events: Array<{ eventId: string; name: string; timestamp: string; data: Record<string, any> }>;
  cursor: string;
  truncated: boolean;
  hasMore: boolean;
  nextPollMs: number;
}

/**
 * docs/agents.md "Protocol revisions": the experimental Events extension
 * (io.modelcontextprotocol/events, poll delivery) at 2026-07-28, through the official v2 client and
 * raw JSON-RPC: the capability in server/discover, events/list, events/poll of email.received and
 * approval.decided on exact cursors, scoping to the caller's mailboxes, errors, and
 * ALCARTA_EVENTS_EXTENSION=off.
 */
describe('Events extension at 2026-07-28', () => {
  let server: TestServer;
  let mailboxA: string;
  let mailboxB: string;
  /** Reads and decides nothing but its own mailbox A. */
  let agentA: Client;
  /** Bound to mailbox B only. */
  let agentB: Client;
  let tokenA: string;

  const poll = (client: Client, params: Record<string, unknown>) =>
    client.request({ method: 'events/poll', params }, anyResult) as Promise<unknown> as Promise<PollResult>;
  const list = (client: Client) =>
    client.request({ method: 'events/list', params: {} }, anyResult) as Promise<unknown> as Promise<{
      events: Array<{ name: string; delivery: string[]; inputSchema: any; payloadSchema: any; description: string }>;
    }>;
  const errorOf = async (promise: Promise<unknown>) => {
    const err = await promise.then(
      () => assert.fail('expected a JSON-RPC error'),
      (e: unknown) => e as { code: number; message: string; data?: any },
    );
    return err;
  };
  const raw = (
    secret: string,
    method: string,
    params: Record<string, unknown>,
    capabilities: Record<string, unknown> = DECLARES_EVENTS,
  ) =>
    rawMcp(
      server.url,
      secret,
      { jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: envelope(capabilities) } },
      revision2026Headers(method),
    );

  before(async () => {
    server = await startTestServer();
    mailboxA = await createMailbox(server.admin);
    mailboxB = await createMailbox(server.admin);
    tokenA = (await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxA] }))
      .secret;
    const tokenB = await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailboxB] });
    agentA = await connectMcp2026(server.url, tokenA, { capabilities: DECLARES_EVENTS });
    agentB = await connectMcp2026(server.url, tokenB.secret, { capabilities: DECLARES_EVENTS });
  });

  after(async () => {
    await agentA?.close();
    await agentB?.close();
    await server?.close();
  });

  it('declares the extension in server/discover', () => {
    assert.deepEqual(agentA.getServerCapabilities()?.extensions?.[EVENTS], {});
  });

  it('lists email.received, approval.decided and approval.requested with poll delivery, argument and payload schemas', async () => {
    const { events } = await list(agentA);
    assert.deepEqual(
      events.map((e) => e.name),
      ['email.received', 'approval.decided', 'approval.requested'],
    );
    for (const e of events) {
      assert.deepEqual(e.delivery, ['poll']);
      assert.equal(e.inputSchema.type, 'object');
      assert.equal(e.payloadSchema.type, 'object');
      assert.ok(e.description.length > 20);
    }
    assert.ok('mailbox_id' in events[0].inputSchema.properties);
    assert.ok('request_ids' in events[1].inputSchema.properties);
    assert.deepEqual(Object.keys(events[2].inputSchema.properties).sort(), ['mailbox_id', 'request_ids']);
    assert.deepEqual(events[2].payloadSchema.required, [
      'request_id',
      'mailbox_id',
      'kind',
      'title',
      'created_at',
      'expires_at',
    ]);
  });

  it('lists only the event types the token scopes allow, and polls others as unknown (-32011)', async () => {
    const mailOnly = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxA] });
    const client = await connectMcp2026(server.url, mailOnly.secret, { capabilities: DECLARES_EVENTS });
    try {
      assert.deepEqual(
        (await list(client)).events.map((e) => e.name),
        ['email.received'],
      );
      for (const name of ['approval.decided', 'approval.requested']) {
        assert.equal((await errorOf(poll(client, { name, cursor: null }))).code, -32011, name);
      }
      assert.equal((await errorOf(poll(client, { name: 'no.such.event' }))).code, -32011);
    } finally {
      await client.close();
    }
  });

  it('email.received: starts now, then pages exactly after the cursor (nothing skipped, nothing repeated)', async () => {
    await ingest(server.admin, mailboxA, { subject: 'before the first poll' });
    const start = await poll(agentA, { name: 'email.received', arguments: {}, cursor: null });
    assert.deepEqual(start.events, []);
    assert.equal(start.hasMore, false);
    assert.equal(typeof start.nextPollMs, 'number');

    const sent: string[] = [];
    for (let i = 1; i <= 5; i++) sent.push(await ingest(server.admin, mailboxA, { subject: `mail ${i}` }));

    const seen: PollResult['events'] = [];
    let cursor = start.cursor;
    let pages = 0;
    for (;;) {
      const page = await poll(agentA, { name: 'email.received', cursor, maxEvents: 2 });
      assert.ok(page.events.length <= 2, 'maxEvents caps a page');
      seen.push(...page.events);
      cursor = page.cursor;
      pages++;
      if (!page.hasMore) break;
      assert.ok(pages < 10);
    }
    assert.deepEqual(
      seen.map((e) => e.eventId),
      sent,
    );
    const first = seen[0];
    assert.equal(first.name, 'email.received');
    assert.equal(first.data.message_id, sent[0]);
    assert.equal(first.data.mailbox_id, mailboxA);
    assert.equal(first.data.subject, 'mail 1');
    assert.equal(first.data.from, 'sender@example.org');
    assert.equal(first.timestamp, first.data.received_at);
    assert.equal('type' in first.data, false);

    const again = await poll(agentA, { name: 'email.received', cursor });
    assert.deepEqual(again.events, [], 'the cursor after the last page returns nothing again');
    assert.equal(again.cursor, cursor);

    // Alcarta's message cursor: the same one list_messages and email_await resume from.
    const listed = await callOk2026(agentA, 'list_messages', { mailbox_id: mailboxA, since_cursor: start.cursor });
    assert.deepEqual(
      listed.messages.map((m: { message_id: string }) => m.message_id),
      sent,
    );
  });

  it('email.received: filters by sender and subject, and the cursor moves past what does not match', async () => {
    const start = await poll(agentA, { name: 'email.received', cursor: null });
    await ingest(server.admin, mailboxA, { from: 'boss@example.org', subject: 'Quarterly report' });
    const wanted = await ingest(server.admin, mailboxA, { from: 'boss@example.org', subject: 'Invoice 42' });
    await ingest(server.admin, mailboxA, { from: 'other@example.org', subject: 'Invoice 43' });
    const page = await poll(agentA, {
      name: 'email.received',
      arguments: { from: 'BOSS@example.org', subject_contains: 'invoice' },
      cursor: start.cursor,
    });
    assert.deepEqual(
      page.events.map((e) => e.eventId),
      [wanted],
    );
    const next = await poll(agentA, {
      name: 'email.received',
      arguments: { from: 'boss@example.org' },
      cursor: page.cursor,
    });
    assert.deepEqual(next.events, []);
  });

  it('approval.decided: reports decisions after the cursor exactly once, with the request event fields', async () => {
    const start = await poll(agentA, { name: 'approval.decided', cursor: null });
    assert.deepEqual(start.events, []);
    const approved = await callOk2026(agentA, 'request_approval', { mailbox_id: mailboxA, title: 'Deploy?' });
    const rejected = await callOk2026(agentA, 'request_approval', { mailbox_id: mailboxA, title: 'Delete prod?' });
    const pending = await callOk2026(agentA, 'request_approval', { mailbox_id: mailboxA, title: 'Later' });
    assert.equal((await server.admin.post(`/v1/requests/${approved.request_id}/approve`, {})).status, 200);
    assert.equal((await server.admin.post(`/v1/requests/${rejected.request_id}/reject`, { reason: 'no' })).status, 200);

    const seen: PollResult['events'] = [];
    let cursor = start.cursor;
    // Decisions appear once every transaction older than theirs has ended (on a busy database, a moment).
    await waitFor(
      'both decisions',
      async () => {
        const page = await poll(agentA, { name: 'approval.decided', cursor, maxEvents: 1 });
        seen.push(...page.events);
        cursor = page.cursor;
        return seen.length >= 2;
      },
      { timeoutMs: 30_000 },
    );
    assert.deepEqual(
      seen.map((e) => [e.eventId, e.data.state]),
      [
        [approved.request_id, 'approved'],
        [rejected.request_id, 'rejected'],
      ],
    );
    const event = seen[0];
    assert.equal(event.name, 'approval.decided');
    assert.deepEqual(Object.keys(event.data).sort(), [
      'changed_at',
      'mailbox_id',
      'previous_state',
      'request_id',
      'state',
    ]);
    assert.equal(event.data.mailbox_id, mailboxA);
    assert.equal(event.data.previous_state, 'pending');
    assert.equal(event.timestamp, event.data.changed_at);
    assert.ok(!seen.some((e) => e.eventId === pending.request_id), 'a pending request is no decision');

    const again = await poll(agentA, { name: 'approval.decided', cursor });
    assert.deepEqual(again.events, [], 'nothing repeats after the last cursor');

    // Filters: only the listed requests, only the given states.
    const onlyRejections = await poll(agentA, {
      name: 'approval.decided',
      arguments: { states: ['rejected'], request_ids: [approved.request_id, rejected.request_id] },
      cursor: start.cursor,
    });
    assert.deepEqual(
      onlyRejections.events.map((e) => e.eventId),
      [rejected.request_id],
    );
  });

  it('approval.decided: decisions committed concurrently while polling arrive exactly once each', async () => {
    const start = await poll(agentA, { name: 'approval.decided', cursor: null });
    const requests: string[] = [];
    for (let i = 0; i < 20; i++) {
      requests.push(
        (await callOk2026(agentA, 'request_approval', { mailbox_id: mailboxA, title: `r${i}` })).request_id,
      );
    }
    const seen: string[] = [];
    let cursor = start.cursor;
    const drain = async () => {
      const page = await poll(agentA, { name: 'approval.decided', cursor, maxEvents: 3 });
      seen.push(...page.events.map((e) => e.eventId));
      cursor = page.cursor;
    };
    let deciding = true;
    const decided = Promise.all(
      requests.map((id, i) => server.admin.post(`/v1/requests/${id}/${i % 2 ? 'approve' : 'reject'}`, {})),
    ).finally(() => (deciding = false));
    while (deciding) await drain();
    assert.ok((await decided).every((res) => res.status === 200));
    await waitFor(
      'every decision',
      async () => {
        await drain();
        return seen.length >= requests.length;
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(new Set(seen).size, seen.length, 'no decision twice');
    assert.deepEqual([...seen].sort(), [...requests].sort());
    await drain();
    assert.equal(seen.length, requests.length, 'nothing after the last one');
  });

  it('approval.requested: a request an agent creates is announced once, with its request_created fields, before its decision', async () => {
    const sender = await createToken(server.admin, { scopes: ['mail:send', 'approvals:read'], mailboxes: [mailboxA] });
    const senderClient = await connectMcp2026(server.url, sender.secret, { capabilities: DECLARES_EVENTS });
    try {
      const start = await poll(agentA, { name: 'approval.requested', cursor: null });
      assert.deepEqual(start.events, []);
      assert.match(start.cursor, /^rc1\./);
      const decisionStart = await poll(agentA, { name: 'approval.decided', cursor: null });
      const approval = await callOk2026(agentA, 'request_approval', {
        mailbox_id: mailboxA,
        title: 'Announce me',
        details: 'not in the event',
        expires_in_seconds: 600,
      });
      const email = await callOk2026(senderClient, 'send_email', {
        mailbox_id: mailboxA,
        to: ['customer@example.org'],
        cc: ['manager@example.org'],
        subject: 'Your order',
        text: 'secret body text',
      });

      const seen: PollResult['events'] = [];
      let cursor = start.cursor;
      await waitFor(
        'both new requests',
        async () => {
          const page = await poll(agentA, { name: 'approval.requested', cursor, maxEvents: 1 });
          seen.push(...page.events);
          cursor = page.cursor;
          return seen.length >= 2;
        },
        { timeoutMs: 30_000 },
      );
      assert.match(cursor, /^rc1\./);
      assert.deepEqual(
        seen.map((e) => [e.name, e.eventId]),
        [
          ['approval.requested', approval.request_id],
          ['approval.requested', email.request_id],
        ],
      );
      const stored = await callOk2026(agentA, 'get_request', { request_id: approval.request_id });
      assert.deepEqual(seen[0].data, {
        request_id: approval.request_id,
        mailbox_id: mailboxA,
        kind: 'approval',
        title: 'Announce me',
        created_at: stored.created_at,
        expires_at: approval.expires_at,
      });
      assert.equal(seen[0].timestamp, seen[0].data.created_at);
      const storedEmail = await callOk2026(agentA, 'get_request', { request_id: email.request_id });
      assert.deepEqual(seen[1].data, {
        request_id: email.request_id,
        mailbox_id: mailboxA,
        kind: 'send_email',
        title: storedEmail.title,
        created_at: storedEmail.created_at,
        expires_at: email.expires_at,
        to: ['customer@example.org'],
        cc: ['manager@example.org'],
        subject: 'Your order',
      });
      assert.ok(!JSON.stringify(seen).includes('secret body text'), 'no draft body in the event');
      assert.deepEqual((await poll(agentA, { name: 'approval.requested', cursor })).events, [], 'nothing repeats');
      const onlyEmail = await poll(agentA, {
        name: 'approval.requested',
        arguments: { request_ids: [email.request_id] },
        cursor: start.cursor,
      });
      assert.deepEqual(
        onlyEmail.events.map((e) => e.eventId),
        [email.request_id],
      );

      // The decision feed is unchanged: a creation is no decision; the approval comes as before.
      assert.equal((await server.admin.post(`/v1/requests/${approval.request_id}/approve`, {})).status, 200);
      let decided: PollResult['events'] = [];
      await waitFor(
        'the decision',
        async () => {
          decided = (
            await poll(agentA, {
              name: 'approval.decided',
              arguments: { request_ids: [approval.request_id, email.request_id] },
              cursor: decisionStart.cursor,
            })
          ).events;
          return decided.length >= 1;
        },
        { timeoutMs: 30_000 },
      );
      assert.deepEqual(
        decided.map((e) => [e.eventId, e.data.previous_state, e.data.state]),
        [[approval.request_id, 'pending', 'approved']],
      );
      // In the log: request_created, then the first state change (null → pending) of the same
      // transaction, then the decision.
      const logged = await server.db.query<{ type: string; state: string | null }>(
        `SELECT type, payload->>'state' AS state FROM events WHERE request_id = $1 ORDER BY id`,
        [approval.request_id],
      );
      assert.deepEqual(
        logged.map((e) => [e.type, e.state]),
        [
          ['request_created', null],
          ['request_state_changed', 'pending'],
          ['request_state_changed', 'approved'],
        ],
      );
    } finally {
      await senderClient.close();
    }
  });

  it("never shows another token's mailboxes or requests", async () => {
    const mailStart = await poll(agentB, { name: 'email.received', cursor: null });
    const decisionStart = await poll(agentB, { name: 'approval.decided', cursor: null });
    const requestedStart = await poll(agentB, { name: 'approval.requested', cursor: null });
    await ingest(server.admin, mailboxA, { subject: 'for A only' });
    const request = await callOk2026(agentA, 'request_approval', { mailbox_id: mailboxA, title: 'A only' });
    assert.equal((await server.admin.post(`/v1/requests/${request.request_id}/approve`, {})).status, 200);
    const own = await ingest(server.admin, mailboxB, { subject: 'for B' });
    // A's decision is visible to A once its transaction is below the horizon; then B must still not see it.
    await waitFor(
      'A sees its decision',
      async () => {
        const page = await poll(agentA, {
          name: 'approval.decided',
          arguments: { request_ids: [request.request_id] },
          cursor: decisionStart.cursor,
        });
        return page.events.length === 1;
      },
      { timeoutMs: 30_000 },
    );

    const mail = await poll(agentB, { name: 'email.received', cursor: mailStart.cursor });
    assert.deepEqual(
      mail.events.map((e) => e.eventId),
      [own],
    );
    const decisions = await poll(agentB, { name: 'approval.decided', cursor: decisionStart.cursor });
    assert.deepEqual(decisions.events, []);
    const requested = await poll(agentB, { name: 'approval.requested', cursor: requestedStart.cursor });
    assert.deepEqual(requested.events, []);

    // Naming A's mailbox is "not found", as everywhere in Alcarta (-32602 here).
    for (const name of ['email.received', 'approval.decided', 'approval.requested']) {
      const err = await errorOf(poll(agentB, { name, arguments: { mailbox_id: mailboxA }, cursor: null }));
      assert.equal(err.code, -32602, name);
      assert.match(err.message, /mailbox/);
    }
    // A cursor is only positions: B resuming from A's cursor still sees only B's mail.
    const fromA = await poll(agentB, { name: 'email.received', cursor: mailStart.cursor });
    assert.ok(fromA.events.every((e) => e.data.mailbox_id === mailboxB));
  });

  it('answers bad cursors and bad arguments with -32602, never a server error', async () => {
    const messageCursor = (await poll(agentA, { name: 'email.received', cursor: null })).cursor;
    const decisionCursor = (await poll(agentA, { name: 'approval.decided', cursor: null })).cursor;
    const requestedCursor = (await poll(agentA, { name: 'approval.requested', cursor: null })).cursor;
    const cases: Array<[string, Record<string, unknown>]> = [
      ['decision cursor for new requests', { name: 'approval.requested', cursor: decisionCursor }],
      ['new-request cursor for decisions', { name: 'approval.decided', cursor: requestedCursor }],
      ['states for new requests', { name: 'approval.requested', arguments: { states: ['approved'] }, cursor: null }],
      ['garbage cursor', { name: 'email.received', cursor: 'not-a-cursor' }],
      ['decision cursor for mail', { name: 'email.received', cursor: decisionCursor }],
      ['message cursor for decisions', { name: 'approval.decided', cursor: messageCursor }],
      ['garbage decision cursor', { name: 'approval.decided', cursor: 'dc1.!!' }],
      [
        'overflowing decision cursor',
        { name: 'approval.decided', cursor: `dc1.${Buffer.from('99999999999999999999:1').toString('base64url')}` },
      ],
      ['unknown argument', { name: 'email.received', arguments: { sender: 'x' }, cursor: null }],
      ['wrong state', { name: 'approval.decided', arguments: { states: ['pending'] }, cursor: null }],
      ['maxEvents 0', { name: 'email.received', cursor: null, maxEvents: 0 }],
    ];
    for (const [what, params] of cases) {
      const res = await raw(tokenA, 'events/poll', params);
      assert.equal(res.status, 200, what);
      assert.equal(res.json?.error?.code, -32602, `${what}: ${res.text}`);
    }
    const cursorError = await raw(tokenA, 'events/poll', { name: 'email.received', cursor: 'not-a-cursor' });
    assert.equal(cursorError.json.error.data.reason, 'invalid_cursor');
  });

  it('requires the client to declare the extension (-32021), offers no push (-32601), and no webhooks without a secrets key (-32014)', async () => {
    const subscribe = {
      name: 'email.received',
      arguments: {},
      delivery: { mode: 'webhook', url: 'https://127.0.0.1:9/hook', secret: `whsec_${'A'.repeat(32)}` },
    };
    for (const method of ['events/list', 'events/subscribe']) {
      const undeclared = await raw(tokenA, method, method === 'events/list' ? {} : subscribe, {});
      assert.equal(undeclared.json?.error?.code, -32021, undeclared.text);
      assert.deepEqual(undeclared.json.error.data.requiredCapabilities, DECLARES_EVENTS);
    }
    const stream = await raw(tokenA, 'events/stream', { name: 'email.received' });
    assert.equal(stream.status, 404);
    assert.equal(stream.json?.error?.code, -32601, stream.text);
    // This server has no ALCARTA_SECRETS_KEY to keep subscribers' secrets: events/list offers poll only.
    const unsupported = await raw(tokenA, 'events/subscribe', subscribe);
    assert.equal(unsupported.json?.error?.code, -32014, unsupported.text);
    assert.deepEqual(unsupported.json.error.data, { feature: 'deliveryMode', value: 'webhook' });
  });
});

describe('Events extension with ALCARTA_EVENTS_EXTENSION=off', () => {
  let server: TestServer;
  let token: string;

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_EVENTS_EXTENSION: 'off' } });
    const mailbox = await createMailbox(server.admin);
    token = (await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailbox] })).secret;
  });

  after(async () => {
    await server?.close();
  });

  it('is not in server/discover, and its methods answer -32601', async () => {
    const client = await connectMcp2026(server.url, token, { capabilities: DECLARES_EVENTS });
    try {
      assert.equal(client.getServerCapabilities()?.extensions?.[EVENTS], undefined);
      // The transport answers an unknown method with 404 and -32601 (checked raw below); the v2 client
      // reports that 404 as its own error.
      const err = await client.request({ method: 'events/list', params: {} }, anyResult).then(
        () => assert.fail('events/list answered'),
        (e: { code: string; status?: number }) => e,
      );
      assert.equal(err.code, 'CLIENT_HTTP_NOT_IMPLEMENTED');
    } finally {
      await client.close();
    }
    const res = await rawMcp(
      server.url,
      token,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'events/poll',
        params: { name: 'email.received', _meta: envelope(DECLARES_EVENTS) },
      },
      revision2026Headers('events/poll'),
    );
    assert.equal(res.status, 404);
    assert.equal(res.json?.error?.code, -32601, res.text);
  });
});
