import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Histogram } from 'prom-client';
import { ApprovalService } from '#app/approvals/approval.service.js';
import { Caller } from '#app/kernel/caller.js';
import { MessageCursor } from '#app/mail/message-cursor.js';
import { MessageService } from '#app/mail/message.service.js';
import { Metrics } from '#app/metrics/metrics.js';
import { WaiterRegistry } from '#app/waits/waiter-registry.js';
import { AwaitArguments, WaitService } from '#app/waits/wait.service.js';
import { WaitResult } from '#app/waits/wait-spec.js';
import { inbound, refused, ServiceTier, startServiceTier } from '../support/service-tier';
import { waitFor } from '../support/wait-for';

const MAX_MESSAGE_WAIT_SECONDS = 120;

type MessageEvent = { type: string; message_id: string; subject: string };

const eventIds = (result: WaitResult) => (result.events as MessageEvent[]).map((e) => e.message_id);

/**
 * WaitService and the wait engine in one process: a blocking wait checks the database once, parks
 * in the waiter registry, and is answered by the doorbell of the commit it waits for; cursors resume
 * exactly where the last result ended; deadlines, aborts and scopes end or refuse waits.
 */
describe('WaitService and the wait engine', () => {
  let tier: ServiceTier;
  let waits: WaitService;
  let messages: MessageService;
  let registry: WaiterRegistry;
  let mailbox: string;
  let reader: Caller;

  before(async () => {
    tier = await startServiceTier({ env: { ALCARTA_MAX_MESSAGE_WAIT_SECONDS: String(MAX_MESSAGE_WAIT_SECONDS) } });
    await tier.startDoorbells();
    waits = tier.get(WaitService);
    messages = tier.get(MessageService);
    registry = tier.get(WaiterRegistry);
    mailbox = await tier.mailbox();
    reader = await tier.caller(['mail:read', 'approvals:read'], [mailbox]);
  });
  after(() => tier?.close());

  const messageWait = (fields: Partial<AwaitArguments> = {}): AwaitArguments => ({
    event: { type: 'message_received', mailbox_id: mailbox },
    timeout_seconds: 60,
    delivery: 'poll',
    ...fields,
  });

  /**
   * Resolves once `count` waits are parked: filed in the registry, their first check done (a wait is
   * filed before that check, and arms its deadline timer after it). From then on only a doorbell
   * can answer them.
   */
  const parked = (count = 1) =>
    waitFor(`${count} parked wait(s)`, () => {
      const waiting = registry.all();
      return waiting.length === count && waiting.every((w) => w.timer !== undefined);
    });

  /** How many waits the engine has answered on a doorbell so far (the wake-latency samples). */
  async function wakes(): Promise<number> {
    const histogram = tier.get(Metrics).registry.getSingleMetric('alcarta_wake_latency_seconds') as Histogram;
    const { values } = await histogram.get();
    return values
      .filter((v) => v.metricName === 'alcarta_wake_latency_seconds_count')
      .reduce((sum, v) => sum + v.value, 0);
  }

  it('a parked wait is answered once, by the doorbell of the commit it waits for', async () => {
    const wakesBefore = await wakes();
    const waiting = waits.await(
      reader,
      messageWait({ event: { type: 'message_received', mailbox_id: mailbox, subject_contains: 'order' } }),
    );
    await parked();

    const [skipped] = await messages.store([mailbox], inbound({ subject: 'newsletter' }));
    const [matched] = await messages.store([mailbox], inbound({ subject: 'Order 42' }));
    await messages.store([mailbox], inbound({ subject: 'order 43' }));

    const result = await waiting;
    assert.equal(result.matched, true);
    assert.deepEqual(eventIds(result), [matched.messageId]);
    assert.notEqual(skipped.messageId, matched.messageId);
    assert.equal(registry.size, 0, 'an answered wait leaves the registry');
    assert.equal((await wakes()) - wakesBefore, 1, 'one wake for one wait, however many doorbells rang');
  });

  it('without since_cursor a wait starts after the newest message; with it, nothing is skipped or repeated', async () => {
    const start = await waits.await(reader, messageWait({ timeout_seconds: 0 }));
    assert.deepEqual([start.matched, start.timed_out, start.events], [false, true, []]);

    const stored: string[] = [];
    for (let i = 0; i < 7; i++)
      stored.push((await messages.store([mailbox], inbound({ subject: `m${i}` })))[0].messageId);

    // Pages of three, each resuming at the last one's next_cursor, while more mail arrives.
    const seen: string[] = [];
    let cursor = start.next_cursor!;
    for (let page = 0; seen.length < 10; page++) {
      if (page === 1) {
        for (let i = 7; i < 10; i++)
          stored.push((await messages.store([mailbox], inbound({ subject: `m${i}` })))[0].messageId);
      }
      const result = await waits.await(
        reader,
        messageWait({ since_cursor: cursor, max_events: 3, timeout_seconds: 5 }),
      );
      assert.equal(result.matched, true);
      assert.ok(result.events.length <= 3);
      seen.push(...eventIds(result));
      cursor = result.next_cursor!;
    }
    assert.deepEqual(seen, stored);

    // The last cursor parks until the next message, which is the only one it returns.
    const next = waits.await(reader, messageWait({ since_cursor: cursor }));
    await parked();
    const [later] = await messages.store([mailbox], inbound({ subject: 'later' }));
    assert.deepEqual(eventIds(await next), [later.messageId]);
  });

  it('a cursor from the start returns the mailbox from its first message', async () => {
    const box = await tier.mailbox();
    const boxReader = await tier.caller(['mail:read'], [box]);
    const [first] = await messages.store([box], inbound({ subject: 'first' }));
    const result = await waits.await(boxReader, {
      event: { type: 'message_received', mailbox_id: box },
      since_cursor: MessageCursor.START.toString(),
      timeout_seconds: 0,
      delivery: 'poll',
    });
    assert.deepEqual(eventIds(result), [first.messageId]);
  });

  it('a deadline answers timed_out with a cursor to resume from; an abort answers at once and unparks', async () => {
    const timedOut = await waits.await(reader, messageWait({ timeout_seconds: 1 }));
    assert.deepEqual([timedOut.matched, timedOut.timed_out], [false, true]);
    assert.ok(timedOut.next_cursor);

    const controller = new AbortController();
    const aborted = waits.await(reader, messageWait(), controller.signal);
    await parked();
    controller.abort();
    assert.equal((await aborted).matched, false);
    assert.equal(registry.size, 0);
  });

  it('limits and scopes are checked before anything parks', async () => {
    await refused(
      waits.await(reader, messageWait({ timeout_seconds: MAX_MESSAGE_WAIT_SECONDS + 1 })),
      'invalid_request',
      'timeout_exceeds_limit',
    );
    const noRead = await tier.caller(['approvals:read'], [mailbox]);
    await refused(waits.await(noRead, messageWait()), 'invalid_request', 'missing_scope');
    const outsider = await tier.caller(['mail:read', 'approvals:read'], [await tier.mailbox()]);
    await refused(waits.await(outsider, messageWait()), 'not_found', 'mailbox_not_found');
    await refused(
      waits.await(outsider, messageWait({ since_cursor: MessageCursor.START.toString() })),
      'not_found',
      'mailbox_not_found',
    );

    const agent = await tier.caller(['mail:send', 'approvals:read'], [mailbox]);
    const { request_id } = await tier.get(ApprovalService).requestApproval(agent, { mailboxId: mailbox, title: 'x' });
    const requestWait: AwaitArguments = {
      event: { type: 'request_state_changed', request_ids: [request_id] },
      timeout_seconds: 0,
      delivery: 'poll',
    };
    await refused(waits.await(outsider, requestWait), 'not_found', 'request_not_found');
    await refused(
      waits.await(reader, { ...requestWait, since_cursor: MessageCursor.START.toString() }),
      'invalid_request',
      'since_cursor_not_allowed',
    );
    assert.equal(registry.size, 0);
  });

  it('a request wait is answered by the decision, with the state it reached', async () => {
    const agent = await tier.caller(['mail:send', 'approvals:read'], [mailbox]);
    const person = await tier.caller(['approvals:decide'], [mailbox]);
    const approvals = tier.get(ApprovalService);
    const { request_id } = await approvals.requestApproval(agent, { mailboxId: mailbox, title: 'Deploy' });
    const waiting = waits.await(agent, {
      event: { type: 'request_state_changed', request_ids: [request_id] },
      timeout_seconds: 60,
      delivery: 'poll',
    });
    await parked();
    await approvals.decide(person, request_id, 'rejected', 'not today');
    const result = await waiting;
    assert.equal(result.matched, true);
    assert.deepEqual(
      result.requests?.map((r) => [r.request_id, r.state]),
      [[request_id, 'rejected']],
    );
  });
});
