import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metrics } from '#app/metrics/metrics.js';
import { WaiterRegistry } from '#app/waits/waiter-registry.js';
import { WaitMetrics } from '#app/waits/waits.metrics.js';
import type { PersistedWaitRepository, WaitResolution } from '#app/waits/persisted-wait.repository.js';
import { ResolutionQueue } from '#app/waits/resolution-queue.js';
import type { WaitResult } from '#app/waits/wait-spec.js';
import { waitFor } from '../support/wait-for';

const result: WaitResult = { matched: true, timed_out: false, shutdown: false, events: [] };

/**
 * The batch writer's side of the repository, in memory: each batch's write ends when the test
 * opens it; it resolves the waits not `taken` by someone else, or fails when asked to.
 */
function writer(taken: ReadonlySet<string> = new Set(), failing: ReadonlySet<string> = new Set()) {
  const batches: string[][] = [];
  const gates: Array<() => void> = [];
  let running = 0;
  let mostAtOnce = 0;
  const repository = {
    resolveMany: async (_owner: string, batch: readonly WaitResolution[]): Promise<string[]> => {
      const ids = batch.map((r) => r.waitId);
      batches.push(ids);
      mostAtOnce = Math.max(mostAtOnce, ++running);
      await new Promise<void>((resolve) => gates.push(resolve));
      running--;
      if (ids.some((id) => failing.has(id))) throw new Error('the batch failed');
      return ids.filter((id) => !taken.has(id));
    },
  } as unknown as PersistedWaitRepository;
  return {
    repository,
    batches,
    mostAtOnce: () => mostAtOnce,
    /** Lets every write started so far end. */
    openAll: () => gates.splice(0).forEach((open) => open()),
  };
}

function done() {
  const reports: Array<{ batch: string[]; resolved: string[] }> = [];
  return {
    reports,
    written: (batch: readonly WaitResolution[], resolved: ReadonlySet<string>) =>
      reports.push({ batch: batch.map((r) => r.waitId), resolved: [...resolved] }),
  };
}

const ids = (n: number, prefix = 'wt_') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe('ResolutionQueue', () => {
  it('writes what settled in one turn in batches of 1,000, at most three at once, and reports each batch', async () => {
    const w = writer();
    const d = done();
    const queue = new ResolutionQueue(
      w.repository,
      'owner',
      new WaitMetrics(new Metrics(), new WaiterRegistry()),
      10,
      d.written,
    );
    for (const id of ids(4500)) queue.add(id, result);
    assert.equal(queue.has('wt_0'), true, 'queued waits are in flight');
    await waitFor('three batches being written', () => w.batches.length === 3);
    assert.deepEqual(
      w.batches.map((b) => b.length),
      [1000, 1000, 1000],
    );
    while (w.batches.length < 5 || d.reports.length < 5) {
      w.openAll();
      await new Promise((r) => setImmediate(r));
    }
    await queue.idle();
    assert.equal(w.mostAtOnce(), 3);
    assert.deepEqual(
      w.batches.map((b) => b.length),
      [1000, 1000, 1000, 1000, 500],
    );
    assert.deepEqual(w.batches.flat().sort(), ids(4500).sort(), 'every wait written once');
    assert.deepEqual(
      d.reports.map((r) => r.resolved.length),
      d.reports.map((r) => r.batch.length),
    );
    assert.equal(queue.has('wt_0'), false, 'written waits are no longer in flight');
  });

  it('a small pool gets fewer writers at once', async () => {
    const w = writer();
    const queue = new ResolutionQueue(
      w.repository,
      'owner',
      new WaitMetrics(new Metrics(), new WaiterRegistry()),
      4,
      () => undefined,
    );
    for (const id of ids(2500)) queue.add(id, result);
    await waitFor('a batch being written', () => w.batches.length === 1);
    await new Promise((r) => setImmediate(r));
    assert.equal(w.batches.length, 1, 'one writer for a pool of 4');
    while (w.batches.length < 3) {
      w.openAll();
      await new Promise((r) => setImmediate(r));
    }
    w.openAll();
    await queue.idle();
    assert.equal(w.mostAtOnce(), 1);
  });

  it('reports the waits someone else resolved first, and a failed batch, as not resolved here', async () => {
    const w = writer(new Set(['wt_1']), new Set(['bad_0']));
    const d = done();
    const queue = new ResolutionQueue(
      w.repository,
      'owner',
      new WaitMetrics(new Metrics(), new WaiterRegistry()),
      3,
      d.written,
    );
    for (const id of ids(3)) queue.add(id, result);
    await waitFor('the first batch', () => w.batches.length === 1);
    for (const id of ids(2, 'bad_')) queue.add(id, result);
    queue.add('wt_0', result); // already in flight: not queued twice
    while (d.reports.length < 2) {
      w.openAll();
      await new Promise((r) => setImmediate(r));
    }
    await queue.idle();
    assert.deepEqual(d.reports, [
      { batch: ['wt_0', 'wt_1', 'wt_2'], resolved: ['wt_0', 'wt_2'] },
      { batch: ['bad_0', 'bad_1'], resolved: [] },
    ]);
    assert.equal(queue.has('bad_0'), false, 'a failed batch leaves its waits to the safety re-check');
  });
});
