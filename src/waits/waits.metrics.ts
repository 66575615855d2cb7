import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import { WaiterRegistry } from './waiter-registry';

/**
 * The waits' metrics, registered with the process's registry: the gauge of parked waits, read at
 * scrape time from the registry of parked waiters (nothing drifts), and what the engine records.
 */
@Injectable()
export class WaitMetrics {
  /** From the commit that rang a doorbell to the settling of the waits it woke. */
  readonly wakeLatency: Histogram<'kind'>;
  /** Transactions that wrote persisted-wait outcomes (each holds a batch, see ResolutionQueue). */
  readonly resolutionBatches: Counter;
  readonly resolutions: Counter;
  readonly claims: Counter;
  readonly leaseLosses: Counter;

  constructor(metrics: Metrics, waiters: WaiterRegistry) {
    const registers = [metrics.registry];
    new Gauge({
      name: 'alcarta_active_waits',
      help:
        'Waits parked in this process by kind (message, request) and delivery: poll (a blocking call), ' +
        'websocket (an open socket), persisted (a stored wait this process owns and watches; one replica each).',
      labelNames: ['kind', 'delivery'],
      registers,
      collect() {
        for (const { kind, delivery, count } of waiters.counts()) this.set({ kind, delivery }, count);
      },
    });
    this.wakeLatency = new Histogram({
      name: 'alcarta_wake_latency_seconds',
      help: 'Time from the commit of a change (its doorbell) to the response of a wait it woke, by kind.',
      labelNames: ['kind'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.resolutionBatches = new Counter({
      name: 'alcarta_wait_resolution_batches_total',
      help: 'Transactions in which this process wrote the results of persisted waits it owns (one batch each).',
      registers,
    });
    this.resolutions = new Counter({
      name: 'alcarta_wait_resolutions_total',
      help: 'Persisted waits this process resolved (written in alcarta_wait_resolution_batches_total batches).',
      registers,
    });
    this.claims = new Counter({
      name: 'alcarta_persisted_waits_claimed_total',
      help: 'Pending persisted waits this process claimed: unowned, released by a draining replica, or taken over from a lapsed lease.',
      registers,
    });
    this.leaseLosses = new Counter({
      name: 'alcarta_wait_lease_losses_total',
      help: 'Times this process found its wait lease ended by another replica (it had lapsed) and dropped its watches.',
      registers,
    });
  }
}
