import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { WaiterRegistry } from '../waits/waiter-registry';

/** Prometheus metrics of this process (SPEC §8), read at scrape time from the live objects. */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  constructor(waiters: WaiterRegistry) {
    collectDefaultMetrics({ register: this.registry, prefix: 'alcarta_' });
    new Gauge({
      name: 'alcarta_active_waits',
      help:
        'Waits parked in this process by kind (message, request) and delivery: poll (a blocking call), ' +
        'websocket (an open socket), persisted (a stored wait this process watches; every replica does).',
      labelNames: ['kind', 'delivery'],
      registers: [this.registry],
      collect() {
        for (const { kind, delivery, count } of waiters.counts()) this.set({ kind, delivery }, count);
      },
    });
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
