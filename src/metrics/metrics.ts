import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

/**
 * This process's Prometheus registry and the metrics that code records as things happen. Gauges of
 * live state are read at scrape time instead, registered by the module that owns the state
 * (WaitMetrics, TaskMetrics, OutboxMetrics, ConsoleMetrics; MetricsCollectors for the database),
 * and so are the counters only one module records (the waits' in WaitMetrics).
 * It depends on nothing, so any module can record into it.
 */
@Injectable()
export class Metrics {
  readonly registry = new Registry();

  readonly listenerReconnects = new Counter({
    name: 'alcarta_listener_reconnects_total',
    help: 'Times the doorbell LISTEN connection was re-established after a loss.',
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
