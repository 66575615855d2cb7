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
      help: 'Waits parked in this process, by kind (message, request) and delivery.',
      labelNames: ['kind', 'delivery'],
      registers: [this.registry],
      collect() {
        const counts = waiters.counts();
        this.set({ kind: 'message', delivery: 'poll' }, counts.message);
        this.set({ kind: 'request', delivery: 'poll' }, counts.request);
      },
    });
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
