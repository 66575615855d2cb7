import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import { withinTimeout } from '../metrics/scrape-timeout';
import { WebhookDeliveryRepository } from './webhook-delivery.repository';
import { WebhookEndpointRepository } from './webhook-endpoint.repository';

/**
 * The webhooks' gauges, read from the database at scrape time (every replica reports the same
 * shared numbers); during a database outage the last values stay.
 */
@Injectable()
export class WebhookMetrics {
  constructor(metrics: Metrics, deliveries: WebhookDeliveryRepository, endpoints: WebhookEndpointRepository) {
    new Gauge({
      name: 'alcarta_webhook_queue_depth',
      help: 'Webhook deliveries not yet delivered or given up: queued, retrying or sending.',
      registers: [metrics.registry],
      async collect() {
        const byStatus = await withinTimeout(deliveries.countsByStatus()).catch(() => undefined);
        if (!byStatus) return;
        this.set(['queued', 'retrying', 'sending'].reduce((sum, s) => sum + (byStatus.get(s as never) ?? 0), 0));
      },
    });
    new Gauge({
      name: 'alcarta_webhook_oldest_queued_age_seconds',
      help: 'Seconds since the event of the oldest webhook delivery still waiting (queued, retrying, sending); 0 when none.',
      registers: [metrics.registry],
      async collect() {
        const age = await withinTimeout(deliveries.oldestPendingAgeSeconds()).catch(() => undefined);
        if (age !== undefined) this.set(age);
      },
    });
    new Gauge({
      name: 'alcarta_webhook_endpoint_failing_seconds',
      help: 'Seconds each enabled webhook endpoint has been failing (every attempt since failed); failing 3 days disables it.',
      labelNames: ['webhook_id'],
      registers: [metrics.registry],
      async collect() {
        const failing = await withinTimeout(endpoints.failingSeconds()).catch(() => undefined);
        if (!failing) return;
        this.reset();
        for (const { id, seconds } of failing) this.set({ webhook_id: id }, seconds);
      },
    });
  }
}
