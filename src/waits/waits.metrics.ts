import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import { WaiterRegistry } from './waiter-registry';

/** The waits' gauge, read at scrape time from the registry of parked waiters: nothing drifts. */
@Injectable()
export class WaitMetrics {
  constructor(metrics: Metrics, waiters: WaiterRegistry) {
    new Gauge({
      name: 'alcarta_active_waits',
      help:
        'Waits parked in this process by kind (message, request) and delivery: poll (a blocking call), ' +
        'websocket (an open socket), persisted (a stored wait this process owns and watches; one replica each).',
      labelNames: ['kind', 'delivery'],
      registers: [metrics.registry],
      collect() {
        for (const { kind, delivery, count } of waiters.counts()) this.set({ kind, delivery }, count);
      },
    });
  }
}
