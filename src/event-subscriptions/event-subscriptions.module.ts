import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuthModule } from '../auth/auth.module';
import { EventsModule } from '../events/events.module';
import { SecretsModule } from '../secrets/secrets.module';
import { WaitsModule } from '../waits/waits.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { CallbackVerification } from './callback-verification';
import { EventSubscriptionEntity } from './event-subscription.entity';
import { EventSubscriptionRepository } from './event-subscription.repository';
import { EventSubscriptionService } from './event-subscription.service';
import { SubscriptionFeeder } from './subscription-feeder';

/**
 * Webhook delivery of the Events extension (docs/agents.md, "Webhook delivery"): subscriptions made
 * with `events/subscribe`, their feeds read into the webhook engine's deliveries.
 */
@Module({
  imports: [
    TypeOrmModule.forFeature([EventSubscriptionEntity]),
    AuthModule,
    EventsModule,
    SecretsModule,
    WaitsModule,
    WebhooksModule,
  ],
  providers: [EventSubscriptionRepository, EventSubscriptionService, CallbackVerification, SubscriptionFeeder],
  exports: [EventSubscriptionService],
})
export class EventSubscriptionsModule {}
