import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { PersistedWaitRepository } from './persisted-wait.repository';
import { PersistedWaitSweeper } from './persisted-wait.sweeper';
import { TicketService } from './ticket.service';
import { WaitEngine } from './wait-engine';
import { WaitRepository } from './wait.repository';
import { WaitService } from './wait.service';
import { WaiterRegistry } from './waiter-registry';

@Module({
  imports: [EventsModule, MailModule, AuthModule],
  providers: [
    WaiterRegistry,
    WaitRepository,
    PersistedWaitRepository,
    TicketService,
    WaitEngine,
    WaitService,
    PersistedWaitSweeper,
  ],
  exports: [WaitService, WaitEngine, WaiterRegistry, TicketService, PersistedWaitRepository, PersistedWaitSweeper],
})
export class WaitsModule {}
