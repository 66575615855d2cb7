import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Caller } from '#app/kernel/caller.js';
import { MessageCursor } from '#app/mail/message-cursor.js';
import type { PersistedWaitEntity } from '#app/waits/persisted-wait.entity.js';
import type { MessageWaitSpec, WaitResult } from '#app/waits/wait-spec.js';
import { stringifyOnce } from '#app/common/json-once.js';
import { MAX_EVENTS, MessageRow, MessageWaiter, ResultWaiter, SharedResults } from '#app/waits/waiters.js';

const caller = new Caller('tok_a', new Set(['mail:read']), ['mbx_a', 'mbx_b']);

function spec(filters: Partial<MessageWaitSpec> = {}): MessageWaitSpec {
  return {
    kind: 'message',
    caller,
    mailboxId: undefined,
    since: undefined,
    from: undefined,
    subjectContains: undefined,
    fromVerifiedOnly: false,
    timeoutMs: 1000,
    ...filters,
  };
}

/** Message `seq` of mailbox mbx_a (cursor key 1), inbound from alice unless told otherwise. */
function row(seq: number, overrides: Partial<MessageRow> = {}): MessageRow {
  return {
    id: `msg_${seq}`,
    mailboxId: 'mbx_a',
    cursorKey: 1,
    seq,
    direction: 'inbound',
    from: 'Alice@Example.com',
    subject: `Invoice ${seq}`,
    receivedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)),
    authentication: { spf: 'pass', dkim: 'pass', dmarc: 'pass', arc: 'none' },
    fromVerified: true,
    ...overrides,
  };
}

function ids(result: WaitResult): string[] {
  return result.events.map((e) => (e as { message_id: string }).message_id);
}

describe('MessageWaiter', () => {
  it('skips what its cursor has seen, matches the rest in order, and moves its cursor past every row', async () => {
    const waiter = new MessageWaiter(spec(), MessageCursor.fromPositions([[1, 2]]));
    waiter.consume([row(1), row(2), row(3), row(4)]);
    waiter.settleIfMatched();
    const result = await waiter.result;
    assert.equal(result.matched, true);
    assert.deepEqual(ids(result), ['msg_3', 'msg_4']);
    assert.equal(MessageCursor.parse(result.next_cursor!).position(1), 4);
  });

  it('applies from (case-insensitive), subject_contains and from_verified; outbound mail never matches', () => {
    const waiter = new MessageWaiter(
      spec({ from: 'alice@example.com', subjectContains: 'invoice', fromVerifiedOnly: true }),
      MessageCursor.START,
    );
    waiter.consume([
      row(1, { direction: 'outbound' }),
      row(2, { from: 'bob@example.com' }),
      row(3, { subject: 'Hello' }),
      row(4, { fromVerified: false }),
    ]);
    waiter.settleIfMatched();
    assert.equal(waiter.settled, false, 'nothing matched');
    assert.equal(waiter.cursor.position(1), 4, 'but every row was seen');
    waiter.consume([row(5)]);
    waiter.settleIfMatched();
    assert.equal(waiter.settled, true);
  });

  it('a gap before the next row means the scan started too late: it needs its own scan and consumes nothing', () => {
    const waiter = new MessageWaiter(spec(), MessageCursor.fromPositions([[1, 2]]));
    waiter.consume([row(4), row(5)]);
    assert.equal(waiter.needsOwnScan, true);
    assert.equal(waiter.cursor.position(1), 2);
  });

  it(`stops at ${MAX_EVENTS} matches with its cursor on the last one, so the next call resumes after it`, async () => {
    const waiter = new MessageWaiter(spec(), MessageCursor.START);
    waiter.consume(Array.from({ length: MAX_EVENTS + 5 }, (_, i) => row(i + 1)));
    assert.equal(waiter.full, true);
    waiter.settleIfMatched();
    const result = await waiter.result;
    assert.equal(result.events.length, MAX_EVENTS);
    assert.equal(MessageCursor.parse(result.next_cursor!).position(1), MAX_EVENTS);
  });

  it('is filed under its mailbox, its token’s mailboxes, or `*`, and watches only those', () => {
    assert.deepEqual(new MessageWaiter(spec({ mailboxId: 'mbx_b' }), MessageCursor.START).keys, ['mbx_b']);
    const anyOfMine = new MessageWaiter(spec(), MessageCursor.START);
    assert.deepEqual(anyOfMine.keys, ['mbx_a', 'mbx_b']);
    assert.equal(anyOfMine.watches('mbx_b'), true);
    assert.equal(anyOfMine.watches('mbx_c'), false);
    const everywhere = new Caller('tok_all', new Set(['mail:read']), ['*']);
    assert.deepEqual(new MessageWaiter(spec({ caller: everywhere }), MessageCursor.START).keys, ['*']);
  });

  it('a timeout and a shutdown answer with its cursor; it settles once, and a settled waiter consumes nothing', async () => {
    const waiter = new MessageWaiter(spec(), MessageCursor.fromPositions([[1, 7]]));
    assert.deepEqual(waiter.shutdown(), {
      matched: false,
      timed_out: false,
      shutdown: true,
      events: [],
      next_cursor: waiter.cursor.toString(),
    });
    waiter.finish(waiter.timedOut());
    waiter.finish(waiter.shutdown());
    waiter.consume([row(8)]);
    const result = await waiter.result;
    assert.equal(result.timed_out, true);
    assert.equal(result.shutdown, false);
    assert.equal(waiter.cursor.position(1), 7);
  });

  it('a token losing its access ends it without a result, and says why', async () => {
    const waiter = new MessageWaiter(spec(), MessageCursor.START);
    waiter.endAccess('token_revoked');
    waiter.endAccess('token_expired');
    assert.equal(waiter.accessEnded, 'token_revoked');
    assert.equal((await waiter.result).matched, false);
  });
});

describe('SharedResults', () => {
  it('waiters of one pass that end with the same matches at the same position share one result', async () => {
    const rows = [row(1, { from: 'noise@example.org' }), row(2), row(3, { from: 'bob@example.org', subject: 'Hello' })];
    const fromStart = new MessageWaiter(spec({ from: 'alice@example.com' }), MessageCursor.START);
    const fromOne = new MessageWaiter(spec({ from: 'alice@example.com' }), MessageCursor.fromPositions([[1, 1]]));
    const unfiltered = new MessageWaiter(spec(), MessageCursor.fromPositions([[1, 1]]));
    const invoices = new MessageWaiter(spec({ subjectContains: 'invoice' }), MessageCursor.fromPositions([[1, 1]]));
    const shared = new SharedResults();
    for (const w of [fromStart, fromOne, unfiltered, invoices]) {
      w.consume(rows);
      w.settleIfMatched(shared);
    }
    const [a, b, c, d] = await Promise.all([fromStart, fromOne, unfiltered, invoices].map((w) => w.result));
    assert.equal(a, b, 'same matches, same position: one object');
    assert.equal(a, d);
    assert.deepEqual(ids(a), ['msg_2']);
    assert.notEqual(a, c, 'other matches: a result of its own');
    assert.deepEqual(ids(c), ['msg_2', 'msg_3']);
    assert.equal(a.events[0], c.events[0], 'each row’s event is built once');
    assert.equal(a.next_cursor, c.next_cursor);
  });

  it('waiters at different positions after the pass do not share', async () => {
    const shared = new SharedResults();
    const one = new MessageWaiter(spec(), MessageCursor.START);
    const other = new MessageWaiter(
      spec(),
      MessageCursor.fromPositions([
        [1, 1],
        [2, 5],
      ]),
    );
    for (const w of [one, other]) {
      w.consume([row(2), row(3)].map((r) => ({ ...r, seq: r.seq - 1 })));
      w.settleIfMatched(shared);
    }
    const [a, b] = await Promise.all([one.result, other.result]);
    assert.notEqual(a, b);
    assert.deepEqual(ids(b), ['msg_3']);
    assert.notEqual(a.next_cursor, b.next_cursor);
  });

  it('stringifyOnce serialises an object once and gives the same JSON as JSON.stringify', () => {
    const result = { matched: true, events: [{ message_id: 'msg_1' }] };
    const json = stringifyOnce(result);
    assert.equal(json, JSON.stringify(result));
    assert.equal(stringifyOnce(result), json);
  });
});

describe('ResultWaiter', () => {
  const pending = { matched: false, timed_out: false, shutdown: false, events: [], wait_status: 'pending' };

  function waiter(): ResultWaiter {
    return new ResultWaiter(
      'wt_a',
      'message',
      caller,
      'poll',
      () => ({ ...pending, timed_out: true }),
      () => ({ ...pending, shutdown: true }),
    );
  }

  function wait(status: 'pending' | 'resolved', result: Record<string, unknown> | null): PersistedWaitEntity {
    return { id: 'wt_a', status, result } as unknown as PersistedWaitEntity;
  }

  it('stays parked while the wait is pending, and answers with the fixed result once resolved', async () => {
    const w = waiter();
    assert.deepEqual(w.keys, ['wt_a']);
    w.evaluate(wait('pending', null));
    assert.equal(w.settled, false);
    const fixed = { matched: true, timed_out: false, shutdown: false, events: [{ type: 'message_received' }] };
    w.evaluate(wait('resolved', fixed));
    assert.deepEqual(await w.result, fixed);
  });

  it('a wait that is gone (purged with its task) answers at once with the caller’s timeout answer', async () => {
    const w = waiter();
    w.evaluate(null);
    assert.deepEqual(await w.result, { ...pending, timed_out: true });
  });

  it('a wait ended by its token losing access ends the waiter without a result', () => {
    const w = waiter();
    w.evaluate(wait('resolved', { error: 'unauthorized', reason: 'access_removed' }));
    assert.equal(w.settled, true);
    assert.equal(w.accessEnded, 'access_removed');
  });
});
