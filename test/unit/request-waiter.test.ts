import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestState } from '#app/approvals/approval-request.entity.js';
import { Caller } from '#app/kernel/caller.js';
import type { DeliveryStatus } from '#app/outbox/outbound-delivery.entity.js';
import type { RequestWaitSpec, WaitResult } from '#app/waits/wait-spec.js';
import { RequestRow, RequestWaiter } from '#app/waits/waiters.js';

const caller = new Caller('tok_a', new Set(['approvals:read']), ['*']);

function spec(states: RequestState[], deliveryStates: DeliveryStatus[], ids = ['chk_a']): RequestWaitSpec {
  return {
    kind: 'request',
    caller,
    requestIds: ids,
    states: new Set(states),
    deliveryStates: new Set(deliveryStates),
    timeoutMs: 1000,
  };
}

function row(id: string, state: RequestState, delivery?: DeliveryStatus): RequestRow {
  return {
    id,
    state,
    latest: { type: 'request_state_changed', request_id: id, state, previous_state: 'pending', changed_at: 't1' },
    delivery: delivery && { status: delivery, attempts: 0 },
    latestDelivery: delivery && {
      type: 'message_delivery_changed',
      mailbox_id: 'mbx_a',
      message_id: 'msg_a',
      request_id: id,
      status: delivery,
      changed_at: 't2',
    },
  };
}

/** Evaluates `rows` on a fresh waiter; the result if it settled. */
async function evaluate(waitSpec: RequestWaitSpec, rows: RequestRow[]): Promise<WaitResult | undefined> {
  const waiter = new RequestWaiter(waitSpec, rows);
  waiter.evaluate(rows);
  return waiter.settled ? waiter.result : undefined;
}

describe('RequestWaiter with delivery_states', () => {
  it('awaits a request state or a delivery status, either one', () => {
    const waiter = new RequestWaiter(spec(['rejected'], ['sent', 'failed']), []);
    assert.equal(waiter.awaits('rejected', undefined), true);
    assert.equal(waiter.awaits('approved', 'sent'), true);
    assert.equal(waiter.awaits('approved', 'failed'), true);
    assert.equal(waiter.awaits('approved', 'queued'), false);
    assert.equal(waiter.awaits('approved', undefined), false);
    assert.equal(waiter.awaits('pending', undefined), false);
  });

  it('without delivery_states, a delivery never matches', () => {
    const waiter = new RequestWaiter(spec(['rejected'], []), []);
    for (const status of ['sent', 'failed', 'not_configured'] as const)
      assert.equal(waiter.awaits('approved', status), false);
  });

  it('a delivery match brings the delivery event; a state match the transition', async () => {
    const result = await evaluate(spec(['rejected'], ['sent'], ['chk_a', 'chk_b', 'chk_c']), [
      row('chk_a', 'approved', 'sent'),
      row('chk_b', 'rejected'),
      row('chk_c', 'approved', 'queued'),
    ]);
    assert.ok(result);
    assert.deepEqual(
      result.events.map((e) => [(e as { type: string }).type, (e as { request_id: string }).request_id]),
      [
        ['message_delivery_changed', 'chk_a'],
        ['request_state_changed', 'chk_b'],
      ],
    );
    assert.deepEqual(result.requests, [
      { request_id: 'chk_a', state: 'approved', delivery: { status: 'sent', attempts: 0 } },
      { request_id: 'chk_b', state: 'rejected' },
      { request_id: 'chk_c', state: 'approved', delivery: { status: 'queued', attempts: 0 } },
    ]);
  });

  it('a request matched both ways brings its delivery event (always the later one)', async () => {
    const result = await evaluate(spec(['approved'], ['not_configured']), [row('chk_a', 'approved', 'not_configured')]);
    assert.deepEqual(
      result?.events.map((e) => (e as { type: string }).type),
      ['message_delivery_changed'],
    );
  });

  it('stays parked while no listed request matches, and keeps the latest truth for its timeout', () => {
    const waiter = new RequestWaiter(spec(['rejected'], ['sent']), [row('chk_a', 'pending')]);
    waiter.evaluate([row('chk_a', 'approved', 'queued')]);
    assert.equal(waiter.settled, false);
    assert.deepEqual(waiter.timedOut().requests, [
      { request_id: 'chk_a', state: 'approved', delivery: { status: 'queued', attempts: 0 } },
    ]);
  });
});
