import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboundDeliveryEntity } from './outbound-delivery.entity';
import { OutboundDeliveryRepository } from './outbound-delivery.repository';
import { OutboxService } from './outbox.service';

/** Outbound mail: the delivery jobs of approved messages and the worker that sends them. */
@Module({
  imports: [TypeOrmModule.forFeature([OutboundDeliveryEntity]), MailModule, EventsModule],
  providers: [OutboundDeliveryRepository, OutboxService],
  exports: [OutboxService],
})
export class OutboxModule {}
