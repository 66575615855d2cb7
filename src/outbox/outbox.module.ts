import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboundDeliveryEntity } from './outbound-delivery.entity';
import { OutboundDeliveryRepository } from './outbound-delivery.repository';
import { OutboxController } from './outbox.controller';
import { OutboxMetrics } from './outbox.metrics';
import { OutboxService } from './outbox.service';
import { KeptMailStore } from './kept-mail';
import { OutboundRoutes } from './outbound-routes';
import { OutboxWorker } from './outbox.worker';
import { SmtpRelay } from './smtp-relay';

/**
 * Outbound mail: the delivery jobs of approved messages and the worker that sends them. The relay
 * is shared with approval by email, whose mails are not messages of a mailbox.
 */
@Module({
  imports: [TypeOrmModule.forFeature([OutboundDeliveryEntity]), MailModule, EventsModule],
  controllers: [OutboxController],
  providers: [
    OutboundDeliveryRepository,
    OutboxService,
    OutboxWorker,
    SmtpRelay,
    KeptMailStore,
    OutboxMetrics,
    OutboundRoutes,
  ],
  exports: [OutboxService, OutboxWorker, SmtpRelay, KeptMailStore, OutboundRoutes],
})
export class OutboxModule {}
