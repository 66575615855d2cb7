import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { BackgroundJob, Job } from '../lifecycle/background-job';
import { DrainState } from '../lifecycle/drain-state';
import { Housekeeping } from '../lifecycle/housekeeping';
import { WebhookDeliveryRepository } from './webhook-delivery.repository';
import { WebhookEndpointRepository } from './webhook-endpoint.repository';

/**
 * Deletes finished webhook deliveries (delivered or failed) and their attempts once they are older
 * than ALCARTA_EVENT_RETENTION_DAYS, like the events they carried: a replay cannot reach further
 * back than the event log either. Deliveries still under way are never deleted, unless their
 * endpoint expired (an Events-extension subscription whose TTL ran out): it goes with them.
 */
@Job('work')
@Injectable()
export class WebhookRetentionHousekeeping implements BackgroundJob {
  private readonly housekeeping: Housekeeping;

  constructor(
    config: AppConfig,
    drain: DrainState,
    deliveries: WebhookDeliveryRepository,
    endpoints: WebhookEndpointRepository,
  ) {
    this.housekeeping = new Housekeeping(WebhookRetentionHousekeeping.name, config, drain, async () => ({
      webhook_deliveries: await deliveries.deleteFinishedBefore(new Date(Date.now() - config.eventRetentionMs)),
      expired_webhook_endpoints: await endpoints.deleteExpired(),
    }));
  }

  start(): void {
    this.housekeeping.start();
  }

  stop(): Promise<void> {
    return this.housekeeping.stop();
  }
}
