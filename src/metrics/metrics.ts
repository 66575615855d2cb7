import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

/**
 * This process's Prometheus registry and the metrics that code records as things happen. Gauges of
 * live state are read at scrape time instead, registered by the module that owns the state
 * (WaitMetrics, TaskMetrics, OutboxMetrics, ConsoleMetrics; MetricsCollectors for the database).
 * It depends on nothing, so any module can record into it.
 */
@Injectable()
export class Metrics {
  readonly registry = new Registry();

  /** From the commit that rang a doorbell to the settling of the waits it woke. */
  readonly wakeLatency = new Histogram({
    name: 'alcarta_wake_latency_seconds',
    help: 'Time from the commit of a change (its doorbell) to the response of a wait it woke, by kind.',
    labelNames: ['kind'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  readonly listenerReconnects = new Counter({
    name: 'alcarta_listener_reconnects_total',
    help: 'Times the doorbell LISTEN connection was re-established after a loss.',
    registers: [this.registry],
  });

  /** Transactions that wrote persisted-wait outcomes (each holds a batch, see ResolutionQueue). */
  readonly waitResolutionBatches = new Counter({
    name: 'alcarta_wait_resolution_batches_total',
    help: 'Transactions in which this process wrote the results of persisted waits it owns (one batch each).',
    registers: [this.registry],
  });

  readonly waitResolutions = new Counter({
    name: 'alcarta_wait_resolutions_total',
    help: 'Persisted waits this process resolved (written in alcarta_wait_resolution_batches_total batches).',
    registers: [this.registry],
  });

  readonly waitClaims = new Counter({
    name: 'alcarta_persisted_waits_claimed_total',
    help: 'Pending persisted waits this process claimed: unowned, released by a draining replica, or taken over from a lapsed lease.',
    registers: [this.registry],
  });

  readonly waitLeaseLosses = new Counter({
    name: 'alcarta_wait_lease_losses_total',
    help: 'Times this process found its wait lease ended by another replica (it had lapsed) and dropped its watchers.',
    registers: [this.registry],
  });

  readonly httpDuration = new Histogram({
    name: 'alcarta_http_request_duration_seconds',
    help: 'HTTP request durations by method, route and status (blocking waits included).',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30, 120, 600, 3600, 14400],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'alcarta_' });
  }
}
