import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeDoorbell,
  Doorbell,
  encodeDoorbell,
  RESOLVED_BELL_MAX_BYTES,
  resolvedWaitBells,
} from '#app/events/doorbell.js';
import { newId } from '#app/common/ids.js';

/** What the database sends: the payload and the commit time (see EventLog). */
const delivered = (bell: Doorbell) => decodeDoorbell(`${encodeDoorbell(bell)} 1700000000000`);

describe('persisted-wait doorbells (docs/operators.md "Capacity"; owners, batched resolution)', () => {
  it('wait_created names its owner when the replica that stored it watches it, and none when unowned', () => {
    assert.deepEqual(delivered({ kind: 'wait_created', waitId: 'wt_a', owner: 'pod-1:42:Xy9' }), {
      kind: 'wait_created',
      waitId: 'wt_a',
      owner: 'pod-1:42:Xy9',
      at: 1700000000000,
    });
    assert.equal(encodeDoorbell({ kind: 'wait_created', waitId: 'wt_a' }), 'n wt_a');
    assert.deepEqual(delivered({ kind: 'wait_created', waitId: 'wt_a' }), {
      kind: 'wait_created',
      waitId: 'wt_a',
      at: 1700000000000,
    });
  });

  it('a released lease rings with its owner', () => {
    assert.deepEqual(delivered({ kind: 'waits_released', owner: 'pod-1:42:Xy9' }), {
      kind: 'waits_released',
      owner: 'pod-1:42:Xy9',
      at: 1700000000000,
    });
  });

  it('one resolved wait rings as wait_resolved, as before; several share a bell', () => {
    assert.deepEqual(resolvedWaitBells(['wt_a']), [{ kind: 'wait_resolved', waitId: 'wt_a' }]);
    assert.equal(encodeDoorbell({ kind: 'waits_resolved', waitIds: ['wt_a', 'wt_b'] }), 'w wt_a wt_b');
    assert.deepEqual(delivered({ kind: 'waits_resolved', waitIds: ['wt_a', 'wt_b', 'wt_c'] }), {
      kind: 'waits_resolved',
      waitIds: ['wt_a', 'wt_b', 'wt_c'],
      at: 1700000000000,
    });
    assert.deepEqual(resolvedWaitBells([]), []);
  });

  it('10,000 resolved waits ring in payloads under the NOTIFY limit, every id exactly once, in order', () => {
    const ids = Array.from({ length: 10_000 }, () => newId('wt'));
    const bells = resolvedWaitBells(ids);
    const payloads = bells.map((bell) => `${encodeDoorbell(bell)} 1700000000000`);
    for (const payload of payloads) assert.ok(Buffer.byteLength(payload) < 8000, `${Buffer.byteLength(payload)} bytes`);
    for (const bell of bells) assert.ok(Buffer.byteLength(encodeDoorbell(bell)) <= RESOLVED_BELL_MAX_BYTES);
    const decoded = payloads.flatMap((payload) => {
      const bell = decodeDoorbell(payload)!;
      return bell.kind === 'waits_resolved' ? bell.waitIds : bell.kind === 'wait_resolved' ? [bell.waitId] : [];
    });
    assert.deepEqual(decoded, ids);
    assert.ok(bells.length <= Math.ceil((ids.length * 26) / RESOLVED_BELL_MAX_BYTES) + 1, `${bells.length} bells`);
  });
});
