import { Module } from '@nestjs/common';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { WaitEngine } from './wait-engine';
import { WaitRepository } from './wait.repository';
import { WaitService } from './wait.service';
import { WaiterRegistry } from './waiter-registry';

@Module({
  imports: [EventsModule, MailModule],
  providers: [WaiterRegistry, WaitRepository, WaitEngine, WaitService],
  exports: [WaitService, WaitEngine, WaiterRegistry],
})
export class WaitsModule {}
