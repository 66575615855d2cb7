import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callError, callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import type { RestClient } from '../support/rest';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

interface MessageEvent {
  type: string;
  mailbox_id: string;
  message_id: string;
  from: string;
  subject: string;
  received_at: string;
}
interface MessageResult {
  matched: boolean;
  timed_out: boolean;
  shutdown: boolean;
  events: MessageEvent[];
  next_cursor: string;
}

/** Long enough for any wake-up on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 50;

const ids = (r: MessageResult) => r.events.map((e) => e.message_id);

/**
 * docs/agents.md "Waits" message waits through email_await and monitor_inbox: blocking until mail
 * arrives, the start position with and without since_cursor, mailbox scope and visibility, filters,
 * outbound mail, result shapes, argument errors, and cursor exactness under concurrent writers.
 */
describe('message waits', () => {
  let server: TestServer;
  let agent: Client; // mail:read, mail:send, approvals:read on every mailbox
  let bound: Client; // mail:read on mailboxes A and B only
  let approvalsOnly: Client;
  let ingester: RestClient;
  let mailboxA: string;
  let mailboxB: string;
  let mailboxC: string; // invisible to `bound`

  const awaitMessages = (client: Client, event: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
    callOk<MessageResult>(client, 'email_await', { event: { type: 'message_received', ...event }, ...extra });
  const parked = (count = 1) =>
    waitFor(`${count} parked message wait(s)`, async () => (await activeWaits(server.url, 'message')) === count);
  /** Every message id of a mailbox in mailbox order (via list_messages), and the cursor at its end. */
  const listAll = async (client: Client, mailboxId: string) => {
    const messageIds: string[] = [];
    for (let cursor: string | undefined; ;) {
      const page = await callOk(client, 'list_messages', { mailbox_id: mailboxId, limit: 100, since_cursor: cursor });
      cursor = page.next_cursor as string;
      if (page.messages.length === 0) return { messageIds, cursor };
      messageIds.push(...page.messages.map((m: { message_id: string }) => m.message_id));
    }
  };
  const endOf = async (mailboxId: string) => (await listAll(agent, mailboxId)).cursor;
  /** A timeout-0 check from a position: what a resuming client would get at once. */
  const check = (client: Client, event: Record<string, unknown>, since_cursor: string) =>
    awaitMessages(client, event, { since_cursor, timeout_seconds: 0 });
  /** The exact shape (docs/agents.md "Waits") of a matched result, with these message ids as its events. */
  const assertMatched = (r: MessageResult, messageIds: string[], what?: string) => {
    assert.equal(typeof r.next_cursor, 'string');
    assert.deepEqual(
      { ...r, events: ids(r) },
      { matched: true, timed_out: false, shutdown: false, events: messageIds, next_cursor: r.next_cursor },
      what,
    );
  };
  const assertTimedOut = (r: MessageResult) => {
    assert.equal(typeof r.next_cursor, 'string');
    assert.deepEqual(r, { matched: false, timed_out: true, shutdown: false, events: [], next_cursor: r.next_cursor });
  };

  before(async () => {
    // Writers ingest hundreds of messages as fast as they can with one token: a stress test of the
    // cursor, not of the rate limit (test/e2e/rate-limits.test.ts), which is off here.
    server = await startTestServer({ env: { ALCARTA_DB_POOL_SIZE: '12', ALCARTA_RATE_LIMIT_PER_SECOND: '0' } });
    [mailboxA, mailboxB, mailboxC] = await Promise.all([1, 2, 3].map(() => createMailbox(server.admin)));
    const agentToken = await createToken(server.admin, {
      scopes: ['mail:read', 'mail:send', 'approvals:read'],
      mailboxes: ['*'],
    });
    const boundToken = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxA, mailboxB] });
    const approvalsToken = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: ['*'] });
    const ingestToken = await createToken(server.admin, { scopes: ['mail:ingest'], mailboxes: ['*'] });
    ingester = server.admin.withToken(ingestToken.secret);
    agent = await connectMcp(server.url, agentToken.secret);
    bound = await connectMcp(server.url, boundToken.secret);
    approvalsOnly = await connectMcp(server.url, approvalsToken.secret);
  });

  after(async () => {
    await Promise.all([agent, bound, approvalsOnly].map((c) => c?.close()));
    await server?.close();
  });

  it('blocks until a message arrives and returns it as a message_received event', async () => {
    const mailbox = await createMailbox(server.admin);
    const pending = awaitMessages(agent, { mailbox_id: mailbox }, { timeout_seconds: BLOCK });
    await parked();
    const id = await ingest(ingester, mailbox, { from: 'alice@example.org', subject: 'Invoice 7' });
    const result = await pending;
    assertMatched(result, [id]);
    const stored = await callOk(agent, 'get_message', { message_id: id });
    assert.deepEqual(result.events, [
      {
        type: 'message_received',
        mailbox_id: mailbox,
        message_id: id,
        from: 'alice@example.org',
        subject: 'Invoice 7',
        received_at: stored.received_at,
        // JSON ingest: nothing to check (docs/mail.md).
        authentication: { spf: 'none', dkim: 'none', dmarc: 'none', arc: 'none' },
        from_verified: false,
      },
    ]);
    assertTimedOut(await check(agent, { mailbox_id: mailbox }, result.next_cursor));
  });

  it('starts after the newest message without since_cursor, and returns everything after since_cursor at once', async () => {
    const mailbox = await createMailbox(server.admin);
    const start = await endOf(mailbox);
    const earlier = [await ingest(ingester, mailbox), await ingest(ingester, mailbox)];
    const none = await awaitMessages(agent, { mailbox_id: mailbox }, { timeout_seconds: 0 });
    assertTimedOut(none);

    const pending = awaitMessages(agent, { mailbox_id: mailbox }, { timeout_seconds: BLOCK });
    await parked();
    const later = await ingest(ingester, mailbox);
    assertMatched(await pending, [later], 'earlier mail is not returned');

    const resumed = await awaitMessages(
      agent,
      { mailbox_id: mailbox },
      { since_cursor: start, timeout_seconds: BLOCK },
    );
    assertMatched(resumed, [...earlier, later]);
    const fromEarlier = await awaitMessages(agent, { mailbox_id: mailbox }, { since_cursor: none.next_cursor });
    assertMatched(fromEarlier, [later], 'a timed-out result is a valid since_cursor');
  });

  it('returns at most 100 per result, in mailbox order; next_cursor continues exactly after the 100th', async () => {
    const mailbox = await createMailbox(server.admin);
    const start = await endOf(mailbox);
    const ingested: string[] = [];
    for (let i = 0; i < 150; i++) ingested.push(await ingest(ingester, mailbox, { subject: `n${i}` }));
    const first = await awaitMessages(agent, { mailbox_id: mailbox }, { since_cursor: start });
    assertMatched(first, ingested.slice(0, 100));
    const second = await awaitMessages(agent, { mailbox_id: mailbox }, { since_cursor: first.next_cursor });
    assertMatched(second, ingested.slice(100));
    assertTimedOut(await check(agent, { mailbox_id: mailbox }, second.next_cursor));
  });

  it('without mailbox_id watches every mailbox the token may read, and only those', async () => {
    let cursor = (await awaitMessages(bound, {}, { timeout_seconds: 0 })).next_cursor;
    for (const mailbox of [mailboxB, mailboxA]) {
      const pending = awaitMessages(bound, {}, { since_cursor: cursor, timeout_seconds: BLOCK });
      await parked();
      await ingest(ingester, mailboxC, { subject: 'invisible' });
      const visible = await ingest(ingester, mailbox, { subject: 'visible' });
      const result = await pending;
      assertMatched(result, [visible]);
      assert.equal(result.events[0].mailbox_id, mailbox);
      cursor = result.next_cursor;
    }
    assertTimedOut(await check(bound, {}, cursor));
  });

  it('a token bound to * sees a mailbox created after the wait started', async () => {
    const pending = awaitMessages(agent, {}, { timeout_seconds: BLOCK });
    await parked();
    const mailbox = await createMailbox(server.admin);
    const id = await ingest(ingester, mailbox);
    const result = await pending;
    assertMatched(result, [id]);
    assert.equal(result.events[0].mailbox_id, mailbox);
  });

  it('filters from and subject_contains combine with AND; the cursor moves past mail they skip', async () => {
    const mailbox = await createMailbox(server.admin);
    const filters = { mailbox_id: mailbox, from: 'Boss@Example.ORG', subject_contains: 'URGENT' };
    const pending = awaitMessages(agent, filters, { timeout_seconds: BLOCK });
    await parked();
    await ingest(ingester, mailbox, { from: 'boss@example.org', subject: 'lunch?' });
    await ingest(ingester, mailbox, { from: 'other@example.org', subject: 'urgent: budget' });
    await ingest(ingester, mailbox, { from: 'boss@example.org.evil.example', subject: 'URGENT' });
    await ingest(ingester, mailbox, { from: 'xboss@example.org', subject: 'urgent' });
    const match = await ingest(ingester, mailbox, { from: 'boss@example.org', subject: 'Re: this is Urgent!' });
    const result = await pending;
    assertMatched(result, [match]);
    const unfiltered = { mailbox_id: mailbox };
    const resumed = await check(agent, unfiltered, result.next_cursor);
    assertTimedOut(resumed);

    // A filtered wait that times out has moved past the mail it skipped as well.
    const position = resumed.next_cursor;
    await ingest(ingester, mailbox, { from: 'boss@example.org', subject: 'not important' });
    const skipped = await check(agent, filters, position);
    assertTimedOut(skipped);
    assertTimedOut(await check(agent, unfiltered, skipped.next_cursor));
  });

  it('outbound mail (an approved send_email) does not wake a message wait', async () => {
    const mailbox = await createMailbox(server.admin);
    const { request_id } = await callOk(agent, 'send_email', {
      mailbox_id: mailbox,
      to: ['customer@example.org'],
      subject: 'Outbound',
      text: 'Hi',
    });
    const pending = awaitMessages(agent, { mailbox_id: mailbox }, { timeout_seconds: BLOCK });
    await parked();
    assert.equal((await server.admin.post(`/v1/requests/${request_id}/approve`, {})).status, 200);
    const listed = await callOk(agent, 'list_messages', { mailbox_id: mailbox });
    assert.deepEqual(
      listed.messages.map((m: { direction: string }) => m.direction),
      ['outbound'],
    );
    const inbound = await ingest(ingester, mailbox);
    assertMatched(await pending, [inbound]);
  });

  it('every result carries next_cursor; timeout_seconds 0 checks once', async () => {
    const mailbox = await createMailbox(server.admin);
    const timedOut = await awaitMessages(agent, { mailbox_id: mailbox }, { timeout_seconds: 1 });
    assertTimedOut(timedOut);
    const once = await awaitMessages(agent, { mailbox_id: mailbox }, { timeout_seconds: 0 });
    assertTimedOut(once);
    const id = await ingest(ingester, mailbox);
    const pendingMatch = await check(agent, { mailbox_id: mailbox }, once.next_cursor);
    assertMatched(pendingMatch, [id]);
  });

  it('monitor_inbox returns the same result as email_await for the same arguments', async () => {
    const mailbox = await createMailbox(server.admin);
    const start = await endOf(mailbox);
    await ingest(ingester, mailbox, { from: 'a@example.org' });
    await ingest(ingester, mailbox, { from: 'b@example.org' });
    await ingest(ingester, mailbox, { from: 'A@example.org' });
    const args = { since_cursor: start, timeout_seconds: 0 };
    const viaAwait = await awaitMessages(agent, { mailbox_id: mailbox, from: 'a@example.org' }, args);
    assert.equal(viaAwait.events.length, 2);
    const viaMonitor = await callOk(agent, 'monitor_inbox', { mailbox_id: mailbox, from: 'a@example.org', ...args });
    assert.deepEqual(viaMonitor, viaAwait);
    const next = { since_cursor: viaAwait.next_cursor, timeout_seconds: 0 };
    assert.deepEqual(
      await callOk(agent, 'monitor_inbox', { mailbox_id: mailbox, ...next }),
      await awaitMessages(agent, { mailbox_id: mailbox }, next),
    );

    const pending = callOk<MessageResult>(agent, 'monitor_inbox', { timeout_seconds: BLOCK });
    await parked();
    const id = await ingest(ingester, mailbox);
    assertMatched(await pending, [id]);
  });

  describe('argument errors', () => {
    const invalid = async (client: Client, tool: string, args: Record<string, unknown>, reason: string) => {
      const err = await callError(client, tool, args);
      assert.equal(err.error, 'invalid_request', `${JSON.stringify(args)}: ${JSON.stringify(err)}`);
      assert.equal(err.reason, reason, JSON.stringify(args));
      return err;
    };
    const event = () => ({ type: 'message_received', mailbox_id: mailboxA });

    it('rejects timeout_seconds above 300, never clamping it; 300 itself is accepted', async () => {
      for (const tool of ['email_await', 'monitor_inbox']) {
        const args =
          tool === 'email_await'
            ? { event: event(), timeout_seconds: 301 }
            : { mailbox_id: mailboxA, timeout_seconds: 301 };
        const err = await invalid(agent, tool, args, 'timeout_exceeds_limit');
        assert.equal(err.max_timeout_seconds, 300);
      }
      const since = await endOf(mailboxA);
      const id = await ingest(ingester, mailboxA);
      const result = await awaitMessages(
        agent,
        { mailbox_id: mailboxA },
        { since_cursor: since, timeout_seconds: 300 },
      );
      assertMatched(result, [id]);
    });

    it('honours ALCARTA_MAX_MESSAGE_WAIT_SECONDS', async () => {
      const limited = await startTestServer({ env: { ALCARTA_MAX_MESSAGE_WAIT_SECONDS: '5' } });
      const client = await connectMcp(limited.url, limited.adminToken);
      try {
        const mailbox = await createMailbox(limited.admin);
        const err = await invalid(
          client,
          'email_await',
          { event: { type: 'message_received' }, timeout_seconds: 6 },
          'timeout_exceeds_limit',
        );
        assert.equal(err.max_timeout_seconds, 5);
        const since = (await callOk(client, 'list_messages', { mailbox_id: mailbox })).next_cursor;
        const id = await ingest(limited.admin, mailbox);
        const ok = await callOk<MessageResult>(client, 'monitor_inbox', { since_cursor: since, timeout_seconds: 5 });
        assertMatched(ok, [id]);
      } finally {
        await client.close();
        await limited.close();
      }
    });

    it('rejects negative, fractional and non-numeric timeouts', async () => {
      for (const timeout_seconds of [-1, 2.5, '10']) {
        await invalid(agent, 'email_await', { event: event(), timeout_seconds }, 'invalid_argument');
        await invalid(agent, 'monitor_inbox', { timeout_seconds }, 'invalid_argument');
      }
    });

    it('rejects malformed and tampered cursors with invalid_cursor', async () => {
      await ingest(ingester, mailboxA);
      const cursor = await endOf(mailboxA);
      const malformed = [
        'not-a-cursor',
        '',
        `${cursor}%`,
        `${cursor}A`,
        cursor.replace(/^[^.]*\./, 'zz9.'),
        cursor.slice(0, -1),
      ];
      for (const since_cursor of malformed) {
        await invalid(agent, 'email_await', { event: event(), since_cursor, timeout_seconds: 0 }, 'invalid_cursor');
        await invalid(agent, 'monitor_inbox', { since_cursor, timeout_seconds: 0 }, 'invalid_cursor');
      }
    });

    it('rejects an unknown event type and a missing event', async () => {
      await invalid(agent, 'email_await', { event: { type: 'message_deleted' } }, 'invalid_argument');
      await invalid(agent, 'email_await', { event: { ...event(), mailbox: mailboxA } }, 'unknown_argument');
      await invalid(agent, 'email_await', { timeout_seconds: 0 }, 'missing_argument');
    });

    it('answers not_found for an unknown mailbox and for a mailbox the token cannot see', async () => {
      const unknown = await callError(bound, 'email_await', {
        event: { type: 'message_received', mailbox_id: 'mbx_doesnotexist' },
      });
      // A token on every mailbox passes the scope check: the wait's start read finds no such mailbox.
      const unknownToAll = await callError(agent, 'email_await', {
        event: { type: 'message_received', mailbox_id: 'mbx_doesnotexist' },
      });
      const invisible = await callError(bound, 'monitor_inbox', { mailbox_id: mailboxC });
      for (const [err, id] of [
        [unknown, 'mbx_doesnotexist'],
        [unknownToAll, 'mbx_doesnotexist'],
        [invisible, mailboxC],
      ] as const) {
        assert.equal(err.error, 'not_found');
        assert.equal(err.reason, 'mailbox_not_found');
        assert.equal(err.id, id);
      }
    });

    it('refuses a message wait to a token without mail:read, naming the scope', async () => {
      const err = await invalid(approvalsOnly, 'email_await', { event: event(), timeout_seconds: 0 }, 'missing_scope');
      assert.deepEqual(err.required_scopes, ['mail:read']);
    });
  });

  describe('cursor exactness under concurrent writers', () => {
    const WRITERS = 8;
    const PER_WRITER = 25;

    /** WRITERS loops ingest PER_WRITER messages each, spread over `mailboxes`; a consumer loops on waits. */
    const run = async (mailboxes: string[], mailboxLess: boolean) => {
      const token = await createToken(server.admin, { scopes: ['mail:read'], mailboxes });
      const consumer = await connectMcp(server.url, token.secret);
      try {
        const scope = mailboxLess ? {} : { mailbox_id: mailboxes[0] };
        let cursor = mailboxLess
          ? (await awaitMessages(consumer, {}, { timeout_seconds: 0 })).next_cursor
          : (await callOk(consumer, 'list_messages', { mailbox_id: mailboxes[0] })).next_cursor;
        const ingested = new Set<string>();
        let writing = true;
        const writers = Promise.all(
          Array.from({ length: WRITERS }, async (_, w) => {
            for (let i = 0; i < PER_WRITER; i++) {
              ingested.add(await ingest(ingester, mailboxes[(w + i) % mailboxes.length], { subject: `w${w} m${i}` }));
            }
          }),
        ).finally(() => (writing = false));

        const seen: MessageEvent[] = [];
        for (;;) {
          const finalPass = !writing; // every message is committed before this call starts
          const result = await awaitMessages(consumer, scope, {
            since_cursor: cursor,
            timeout_seconds: finalPass ? 0 : 5,
          });
          cursor = result.next_cursor; // persisted before processing, as docs/agents.md "Waits" asks
          seen.push(...result.events);
          if (finalPass && result.events.length === 0) break;
        }
        await writers;

        const seenIds = seen.map((e) => e.message_id);
        assert.equal(ingested.size, WRITERS * PER_WRITER);
        assert.equal(new Set(seenIds).size, seenIds.length, 'a message was returned twice');
        assert.deepEqual(new Set(seenIds), ingested, 'the consumer missed messages');
        for (const mailbox of mailboxes) {
          const order = seen.filter((e) => e.mailbox_id === mailbox).map((e) => e.message_id);
          assert.deepEqual(order, (await listAll(consumer, mailbox)).messageIds, 'events come in mailbox order');
        }
      } finally {
        await consumer.close();
      }
    };

    for (let round = 1; round <= 3; round++) {
      it(`round ${round}: ${WRITERS} writers into one mailbox, one consumer sees each message exactly once`, async () => {
        await run([await createMailbox(server.admin)], false);
      });
      it(`round ${round}: ${WRITERS} writers over 3 mailboxes, a mailbox-less consumer sees each exactly once`, async () => {
        await run(await Promise.all([1, 2, 3].map(() => createMailbox(server.admin))), true);
      });
    }
  });
});
