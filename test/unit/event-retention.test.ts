import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RETENTION_WINDOW_MS, retentionWindows } from '#app/events/event-retention.housekeeping.js';
import { latestDeliveryEvent, latestRequestEvent } from '#app/waits/pruned-events.js';

const HOUR = 3600 * 1000;
const at = (iso: string) => new Date(iso);

describe('retentionWindows', () => {
  it('covers [oldest, cutoff) with adjacent windows of at most an hour, oldest first', () => {
    const oldest = at('2026-01-01T00:10:00.000Z');
    const cutoff = at('2026-01-01T02:40:00.000Z');
    const windows = retentionWindows(oldest, cutoff);
    assert.equal(RETENTION_WINDOW_MS, HOUR);
    assert.deepEqual(
      windows.map((w) => [w.from.toISOString(), w.to.toISOString()]),
      [
        ['2026-01-01T00:10:00.000Z', '2026-01-01T01:10:00.000Z'],
        ['2026-01-01T01:10:00.000Z', '2026-01-01T02:10:00.000Z'],
        ['2026-01-01T02:10:00.000Z', '2026-01-01T02:40:00.000Z'],
      ],
    );
  });

  it('is empty when nothing is older than the cutoff, and one window when only a moment is', () => {
    const cutoff = at('2026-01-01T00:00:00.000Z');
    assert.deepEqual(retentionWindows(cutoff, cutoff), []);
    assert.deepEqual(retentionWindows(at('2026-01-02T00:00:00.000Z'), cutoff), []);
    const justBefore = new Date(cutoff.getTime() - 1);
    assert.deepEqual(retentionWindows(justBefore, cutoff), [{ from: justBefore, to: cutoff }]);
  });

  it('takes the window length as a parameter', () => {
    const windows = retentionWindows(at('2026-01-01T00:00:00.000Z'), at('2026-01-11T00:00:00.000Z'), 24 * HOUR);
    assert.equal(windows.length, 10);
    for (let i = 1; i < windows.length; i++) assert.equal(windows[i].from.getTime(), windows[i - 1].to.getTime());
  });
});

describe('latestRequestEvent', () => {
  const created = at('2026-01-01T08:00:00.123Z');
  const decided = at('2026-01-02T09:30:00.456Z');

  it('is the stored event while there is one', () => {
    const stored = {
      type: 'request_state_changed' as const,
      request_id: 'chk_1',
      state: 'approved',
      previous_state: 'pending',
      changed_at: decided.toISOString(),
    };
    assert.equal(
      latestRequestEvent(stored, { id: 'chk_1', state: 'approved', createdAt: created, decidedAt: decided }),
      stored,
    );
  });

  it('rebuilds a pending request as its creation', () => {
    assert.deepEqual(latestRequestEvent(null, { id: 'chk_1', state: 'pending', createdAt: created, decidedAt: null }), {
      type: 'request_state_changed',
      request_id: 'chk_1',
      state: 'pending',
      previous_state: null,
      changed_at: '2026-01-01T08:00:00.123Z',
    });
  });

  it('rebuilds a decided request as the move from pending at its decision time', () => {
    for (const state of ['approved', 'rejected', 'expired', 'cancelled'] as const) {
      assert.deepEqual(latestRequestEvent(null, { id: 'chk_2', state, createdAt: created, decidedAt: decided }), {
        type: 'request_state_changed',
        request_id: 'chk_2',
        state,
        previous_state: 'pending',
        changed_at: '2026-01-02T09:30:00.456Z',
      });
    }
  });
});

describe('latestDeliveryEvent', () => {
  const delivery = {
    mailboxId: 'mbx_1',
    messageId: 'msg_1',
    requestId: 'chk_1',
    status: 'sent' as const,
    updatedAt: at('2026-01-03T10:00:00.789Z'),
  };

  it('is the stored event while there is one, else the delivery row at its last change', () => {
    const stored = {
      type: 'message_delivery_changed' as const,
      mailbox_id: 'mbx_1',
      message_id: 'msg_1',
      request_id: 'chk_1',
      status: 'sent',
      changed_at: '2026-01-03T10:00:00.789Z',
    };
    assert.equal(latestDeliveryEvent(stored, delivery), stored);
    assert.deepEqual(latestDeliveryEvent(null, delivery), stored);
  });
});
