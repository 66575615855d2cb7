import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SingleFlight } from '#app/waits/single-flight.js';
import { waitFor } from '../support/wait-for';

/** A run that ends when the test says so. */
function gate(): {
  run: (at: number | undefined) => Promise<void>;
  calls: Array<number | undefined>;
  open: () => void;
} {
  const calls: Array<number | undefined> = [];
  let release: (() => void) | undefined;
  return {
    calls,
    run: (at) => {
      calls.push(at);
      return new Promise<void>((resolve) => (release = resolve));
    },
    open: () => release?.(),
  };
}

describe('SingleFlight', () => {
  it('rings during a run cost one more run, with the earliest of their commit times', async () => {
    const flights = new SingleFlight(() => assert.fail('no run fails'));
    const { run, calls, open } = gate();
    flights.ring('m:a', 30, run);
    flights.ring('m:a', 20, run);
    flights.ring('m:a', undefined, run);
    flights.ring('m:a', 10, run);
    assert.deepEqual(calls, [30], 'one run at a time');
    open();
    await waitFor('the second run', () => calls.length === 2);
    assert.deepEqual(calls, [30, 10]);
    open();
    await waitFor('the flight to end', () => flights.size === 0);
    assert.equal(calls.length, 2, 'a burst costs at most two runs');
  });

  it('keys fly independently', () => {
    const flights = new SingleFlight(() => undefined);
    const a = gate();
    const b = gate();
    flights.ring('m:a', undefined, a.run);
    flights.ring('r:b', undefined, b.run);
    assert.equal(flights.size, 2);
    assert.equal(a.calls.length + b.calls.length, 2);
    a.open();
    b.open();
  });

  it('a failed run is reported, and a ring during it still runs', async () => {
    const errors: unknown[] = [];
    const flights = new SingleFlight((err) => errors.push(err));
    let runs = 0;
    let fail: ((err: Error) => void) | undefined;
    flights.ring('w:a', undefined, () => {
      runs++;
      return runs === 1 ? new Promise<void>((_, reject) => (fail = reject)) : Promise.resolve();
    });
    flights.ring('w:a', undefined, () => Promise.resolve());
    fail!(new Error('database went away'));
    await waitFor('the flight to end', () => flights.size === 0);
    assert.equal(runs, 2);
    assert.deepEqual(
      errors.map((e) => (e as Error).message),
      ['database went away'],
    );
  });
});
