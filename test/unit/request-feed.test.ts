import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Caller } from '#app/kernel/caller.js';
import { fingerprintOf } from '#app/console/console-pending-feed.service.js';
import { WaiterRegistry } from '#app/waits/waiter-registry.js';
import { RequestFeedWaiter } from '#app/waits/waiters.js';

const everywhere = new Caller('tok_all', new Set(['approvals:decide']), ['*']);
const twoMailboxes = new Caller('tok_two', new Set(['approvals:decide']), ['mbx_a', 'mbx_b']);

function feed(caller: Caller, mailboxId?: string): { feed: RequestFeedWaiter; rings: () => number } {
  let rings = 0;
  return { feed: new RequestFeedWaiter(caller, mailboxId, () => rings++), rings: () => rings };
}

/** The console's live list is a request feed filed by mailbox id in the WaiterRegistry (docs/approvers.md). */
describe('request feeds', () => {
  it('are filed under the mailboxes they show, or `*`, like message waits', () => {
    assert.deepEqual(feed(everywhere).feed.keys, ['*']);
    assert.deepEqual(feed(twoMailboxes).feed.keys, ['mbx_a', 'mbx_b']);
    assert.deepEqual(feed(twoMailboxes, 'mbx_b').feed.keys, ['mbx_b']);
  });

  it('are found by the doorbells of their mailboxes only, and forgotten when removed', () => {
    const registry = new WaiterRegistry();
    const all = feed(everywhere).feed;
    const two = feed(twoMailboxes).feed;
    const one = feed(twoMailboxes, 'mbx_b').feed;
    for (const f of [all, two, one]) registry.add(f);
    assert.deepEqual(new Set(registry.requestFeeds('mbx_a')), new Set([all, two]));
    assert.deepEqual(new Set(registry.requestFeeds('mbx_b')), new Set([all, two, one]));
    assert.deepEqual(registry.requestFeeds('mbx_c'), [all]);
    assert.equal(registry.allRequestFeeds().length, 3);
    registry.remove(two);
    registry.remove(all);
    assert.deepEqual(registry.requestFeeds('mbx_a'), []);
    assert.deepEqual(registry.allRequestFeeds(), [one]);
  });

  it('are no agent waits: the wait gauges do not count them', () => {
    const registry = new WaiterRegistry();
    registry.add(feed(everywhere).feed);
    assert.equal(
      registry.counts().reduce((sum, c) => sum + c.count, 0),
      0,
    );
    assert.deepEqual(registry.watchedTokens(), ['tok_all'], 'the safety re-check still sees their token');
  });

  it('ring their owner until they end, and never settle on a ring', () => {
    const { feed: f, rings } = feed(twoMailboxes);
    f.ring();
    f.ring();
    assert.equal(rings(), 2);
    assert.equal(f.settled, false);
    f.endAccess('token_revoked');
    f.ring();
    assert.equal(rings(), 2);
    assert.equal(f.accessEnded, 'token_revoked');
  });
});

describe('pending list fingerprints', () => {
  it('are equal for equal lists and differ otherwise', () => {
    assert.equal(fingerprintOf('<ul><li>a</li></ul>'), fingerprintOf('<ul><li>a</li></ul>'));
    assert.notEqual(fingerprintOf('<ul><li>a</li></ul>'), fingerprintOf('<ul><li>b</li></ul>'));
    assert.match(fingerprintOf(''), /^[\w-]{22}$/);
  });
});
