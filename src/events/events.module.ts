import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventEntity } from './event.entity';
import { DoorbellListener } from './doorbell-listener';
import { EventLog } from './event-log';

@Module({
  imports: [TypeOrmModule.forFeature([EventEntity])],
  providers: [EventLog, DoorbellListener],
  exports: [EventLog, DoorbellListener],
})
export class EventsModule {}
