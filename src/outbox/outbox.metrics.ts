import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import { withinTimeout } from '../metrics/scrape-timeout';
import { DELIVERY_STATUSES, DeliveryStatus } from './outbound-delivery.entity';
import { OutboundDeliveryRepository, PENDING_STATUSES } from './outbound-delivery.repository';

/** One scrape reads the counts once for both gauges that need them. */
const SNAPSHOT_REUSE_MS = 500;

/**
 * The outbox's gauges, read from the database at scrape time (every replica reports the same
 * shared numbers). During a database outage a scrape gives up after the collectors' timeout and
 * the last values stay; `alcarta_database_up` says they are stale.
 */
@Injectable()
export class OutboxMetrics {
  private snapshot: { at: number; counts: Promise<Map<DeliveryStatus, number>> } | undefined;

  constructor(metrics: Metrics, deliveries: OutboundDeliveryRepository) {
    const counts = () => {
      if (!this.snapshot || Date.now() - this.snapshot.at > SNAPSHOT_REUSE_MS) {
        const query = deliveries.countsByStatus().then((rows) => new Map(rows.map((r) => [r.status, r.count])));
        this.snapshot = { at: Date.now(), counts: withinTimeout(query) };
      }
      return this.snapshot.counts;
    };
    new Gauge({
      name: 'alcarta_outbox_deliveries',
      help: 'Outbound messages (all replicas) by delivery status.',
      labelNames: ['status'],
      registers: [metrics.registry],
      async collect() {
        const byStatus = await counts().catch(() => undefined);
        if (!byStatus) return;
        for (const status of DELIVERY_STATUSES) this.set({ status }, byStatus.get(status) ?? 0);
      },
    });
    new Gauge({
      name: 'alcarta_outbox_depth',
      help: 'Outbound messages not yet delivered or given up: queued, retrying or sending.',
      registers: [metrics.registry],
      async collect() {
        const byStatus = await counts().catch(() => undefined);
        if (!byStatus) return;
        this.set(PENDING_STATUSES.reduce((sum, status) => sum + (byStatus.get(status) ?? 0), 0));
      },
    });
    new Gauge({
      name: 'alcarta_outbox_oldest_age_seconds',
      help: 'Seconds since the oldest outbound message still waiting for delivery (queued, retrying, sending) was queued; 0 when none.',
      registers: [metrics.registry],
      async collect() {
        const age = await withinTimeout(deliveries.oldestPendingAgeSeconds()).catch(() => undefined);
        if (age !== undefined) this.set(age);
      },
    });
  }
}
