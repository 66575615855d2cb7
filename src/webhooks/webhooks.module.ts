import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditModule } from '../audit/audit.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { SecretsModule } from '../secrets/secrets.module';
import { WebhookAttemptEntity, WebhookDeliveryEntity } from './webhook-delivery.entity';
import { WebhookDeliveryRepository } from './webhook-delivery.repository';
import { WebhookDispatch } from './webhook-dispatch.service';
import { WebhookEndpointEntity } from './webhook-endpoint.entity';
import { WebhookEndpointRepository } from './webhook-endpoint.repository';
import { WebhookMetrics } from './webhook.metrics';
import { WebhookRetentionHousekeeping } from './webhook-retention.housekeeping';
import { WebhookWorker } from './webhook.worker';
import { WebhooksController } from './webhooks.controller';
import { WebhooksService } from './webhooks.service';

/**
 * Webhooks (docs/webhooks.md): endpoints, the delivery queued with every event of the types they
 * ask for, and the worker that POSTs them signed.
 */
@Module({
  imports: [
    TypeOrmModule.forFeature([WebhookEndpointEntity, WebhookDeliveryEntity, WebhookAttemptEntity]),
    EventsModule,
    MailModule,
    SecretsModule,
    AuditModule,
  ],
  controllers: [WebhooksController],
  providers: [
    WebhookEndpointRepository,
    WebhookDeliveryRepository,
    WebhooksService,
    WebhookDispatch,
    WebhookWorker,
    WebhookMetrics,
    WebhookRetentionHousekeeping,
  ],
  exports: [WebhookEndpointRepository, WebhookDeliveryRepository],
})
export class WebhooksModule {}
