import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Test, TestingModule } from '@nestjs/testing';
import { Caller } from '#app/kernel/caller.js';
import { MessageCursor } from '#app/mail/message-cursor.js';
import { Metrics } from '#app/metrics/metrics.js';
import type { MessageWaitSpec, RequestWaitSpec, WaitResult } from '#app/waits/wait-spec.js';
import { WaiterRegistry } from '#app/waits/waiter-registry.js';
import { MessageWaiter, RequestWaiter, ResultWaiter } from '#app/waits/waiters.js';
import { WaitMetrics } from '#app/waits/waits.metrics.js';

const twoMailboxes = new Caller('tok_two', new Set(['mail:read', 'approvals:read']), ['mbx_a', 'mbx_b']);
const everywhere = new Caller('tok_all', new Set(['mail:read']), ['*']);

function messageWaiter(caller: Caller, mailboxId?: string, delivery: 'poll' | 'persisted' = 'poll'): MessageWaiter {
  const spec: MessageWaitSpec = {
    kind: 'message',
    caller,
    mailboxId,
    since: undefined,
    from: undefined,
    subjectContains: undefined,
    fromVerifiedOnly: false,
    timeoutMs: 1000,
  };
  return new MessageWaiter(spec, MessageCursor.START, delivery);
}

function requestWaiter(requestIds: string[]): RequestWaiter {
  const spec: RequestWaitSpec = {
    kind: 'request',
    caller: twoMailboxes,
    requestIds,
    states: new Set(['approved']),
    deliveryStates: new Set(),
    timeoutMs: 1000,
  };
  return new RequestWaiter(spec, []);
}

function resultWaiter(waitId: string): ResultWaiter {
  const answer = (): WaitResult => ({ matched: false, timed_out: true, shutdown: false, events: [] });
  return new ResultWaiter(waitId, 'request', twoMailboxes, 'websocket', answer, answer);
}

describe('WaiterRegistry', () => {
  it('a doorbell of a mailbox finds the waits of that mailbox and of `*`, unsettled ones only', () => {
    const registry = new WaiterRegistry();
    const onA = messageWaiter(twoMailboxes, 'mbx_a');
    const mine = messageWaiter(twoMailboxes);
    const all = messageWaiter(everywhere);
    for (const w of [onA, mine, all]) registry.add(w);
    assert.deepEqual(new Set(registry.messageWaiters('mbx_a')), new Set([onA, mine, all]));
    assert.deepEqual(new Set(registry.messageWaiters('mbx_b')), new Set([mine, all]));
    assert.deepEqual(registry.messageWaiters('mbx_c'), [all]);
    all.finish(all.timedOut());
    assert.deepEqual(registry.messageWaiters('mbx_c'), []);
    assert.deepEqual(registry.watchedMailboxes(), { all: true });
  });

  it('files request waits by request id and result waits by wait id, and forgets them when removed', () => {
    const registry = new WaiterRegistry();
    const both = requestWaiter(['chk_a', 'chk_b']);
    const onlyB = requestWaiter(['chk_b']);
    const result = resultWaiter('wt_a');
    for (const w of [both, onlyB, result]) registry.add(w);
    assert.deepEqual(registry.requestWaiters('chk_a'), [both]);
    assert.deepEqual(registry.requestWaiters('chk_b'), [both, onlyB]);
    assert.deepEqual(registry.resultWaiters('wt_a'), [result]);
    assert.deepEqual(registry.watchedRequests().sort(), ['chk_a', 'chk_b']);
    assert.deepEqual(registry.watchedResults(), ['wt_a']);
    assert.deepEqual(registry.watchedTokens(), ['tok_two']);
    registry.remove(both);
    registry.remove(result);
    registry.remove(result);
    assert.deepEqual(registry.watchedRequests(), ['chk_b']);
    assert.deepEqual(registry.watchedResults(), []);
    assert.equal(registry.size, 1);
  });

  it('keeps one watch per persisted wait, and lets go of it only when that watch is removed', () => {
    const registry = new WaiterRegistry();
    const watch = messageWaiter(twoMailboxes, 'mbx_a', 'persisted');
    watch.persistedId = 'wt_p';
    registry.add(watch);
    assert.equal(registry.persistedWatch('wt_p'), watch);
    assert.deepEqual([...registry.watchedPersisted()], ['wt_p']);
    const stranger = messageWaiter(twoMailboxes, 'mbx_a', 'persisted');
    stranger.persistedId = 'wt_p';
    registry.remove(stranger);
    assert.equal(registry.persistedWatch('wt_p'), watch, 'a waiter never filed does not drop the watch');
    registry.remove(watch);
    assert.equal(registry.persistedWatch('wt_p'), undefined);
    assert.deepEqual(registry.watchedMailboxes(), { all: false, ids: [] });
  });
});

/** The waits module registers its own gauge with the Metrics registry (metrics/ knows no waits). */
describe('WaitMetrics', () => {
  let moduleRef: TestingModule;

  before(async () => {
    moduleRef = await Test.createTestingModule({ providers: [Metrics, WaiterRegistry, WaitMetrics] }).compile();
  });

  after(() => moduleRef.close());

  it('alcarta_active_waits counts the parked waits of the registry by kind and delivery at scrape time', async () => {
    const registry = moduleRef.get(WaiterRegistry);
    const metrics = moduleRef.get(Metrics);
    moduleRef.get(WaitMetrics);
    registry.add(messageWaiter(twoMailboxes));
    registry.add(messageWaiter(everywhere, undefined, 'persisted'));
    registry.add(resultWaiter('wt_a'));
    const values = (await metrics.registry.getSingleMetric('alcarta_active_waits')!.get()).values;
    const count = (kind: string, delivery: string) =>
      values.find((v) => v.labels.kind === kind && v.labels.delivery === delivery)?.value;
    assert.equal(count('message', 'poll'), 1);
    assert.equal(count('message', 'persisted'), 1);
    assert.equal(count('request', 'websocket'), 1);
    assert.equal(count('request', 'poll'), 0);
  });
});
