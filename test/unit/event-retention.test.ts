import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateEnvironment } from '#app/config/environment.js';
import { RETENTION_WINDOW_MS, retentionWindow } from '#app/events/event-retention.housekeeping.js';
import { latestDeliveryEvent, latestRequestEvent } from '#app/waits/pruned-events.js';

const HOUR = 3600 * 1000;
const at = (iso: string) => new Date(iso);

describe('retentionWindow', () => {
  const cutoff = at('2026-01-01T02:40:00.000Z');

  it('starts at the oldest event left and lasts an hour, or ends at the cutoff', () => {
    assert.equal(RETENTION_WINDOW_MS, HOUR);
    assert.deepEqual(retentionWindow(at('2026-01-01T00:10:00.000Z'), cutoff), {
      from: at('2026-01-01T00:10:00.000Z'),
      to: at('2026-01-01T01:10:00.000Z'),
    });
    assert.deepEqual(retentionWindow(at('2026-01-01T02:10:00.000Z'), cutoff), {
      from: at('2026-01-01T02:10:00.000Z'),
      to: cutoff,
    });
    const justBefore = new Date(cutoff.getTime() - 1);
    assert.deepEqual(retentionWindow(justBefore, cutoff), { from: justBefore, to: cutoff });
  });

  it('is undefined when there is no event, or none older than the cutoff', () => {
    assert.equal(retentionWindow(undefined, cutoff), undefined);
    assert.equal(retentionWindow(cutoff, cutoff), undefined);
    assert.equal(retentionWindow(at('2026-02-01T00:00:00.000Z'), cutoff), undefined);
  });

  it('takes the window length as a parameter', () => {
    assert.deepEqual(retentionWindow(at('2025-12-01T00:00:00.000Z'), cutoff, 24 * HOUR), {
      from: at('2025-12-01T00:00:00.000Z'),
      to: at('2025-12-02T00:00:00.000Z'),
    });
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

describe('ALCARTA_EVENT_RETENTION_DAYS', () => {
  it('is 30 days by default and takes 1 to 3650', () => {
    assert.equal(validateEnvironment({}).ALCARTA_EVENT_RETENTION_DAYS, 30);
    assert.equal(validateEnvironment({ ALCARTA_EVENT_RETENTION_DAYS: '1' }).ALCARTA_EVENT_RETENTION_DAYS, 1);
    assert.equal(validateEnvironment({ ALCARTA_EVENT_RETENTION_DAYS: '3650' }).ALCARTA_EVENT_RETENTION_DAYS, 3650);
  });

  it('refuses anything else with a message naming the variable', () => {
    for (const value of ['0', '3651', '7.5', 'month']) {
      assert.throws(
        () => validateEnvironment({ ALCARTA_EVENT_RETENTION_DAYS: value }),
        /ALCARTA_EVENT_RETENTION_DAYS must/,
        value,
      );
    }
  });
});
