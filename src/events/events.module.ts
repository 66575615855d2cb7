import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventEntity } from './event.entity';
import { DoorbellListener } from './doorbell-listener';
import { EventLog } from './event-log';
import { EventRepository } from './event.repository';
import { EventRetentionHousekeeping } from './event-retention.housekeeping';

@Module({
  imports: [TypeOrmModule.forFeature([EventEntity])],
  providers: [EventLog, DoorbellListener, EventRepository, EventRetentionHousekeeping],
  exports: [EventLog, DoorbellListener, EventRepository, EventRetentionHousekeeping],
})
export class EventsModule {}
