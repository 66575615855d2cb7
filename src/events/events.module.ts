import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventEntity } from './event.entity';
import { EventLog } from './event-log';

@Module({
  imports: [TypeOrmModule.forFeature([EventEntity])],
  providers: [EventLog],
  exports: [EventLog],
})
export class EventsModule {}
