import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { EventFeedService } from './event-feed.service';
import { PersistedWaitRepository } from './persisted-wait.repository';
import { PersistedWaitSweeper } from './persisted-wait.sweeper';
import { WaitEngine } from './wait-engine';
import { WaitRepository } from './wait.repository';
import { WaitService } from './wait.service';
import { WaiterRegistry } from './waiter-registry';
import { WaitMetrics } from './waits.metrics';

@Module({
  imports: [EventsModule, MailModule, AuthModule],
  providers: [
    WaiterRegistry,
    WaitRepository,
    PersistedWaitRepository,
    WaitEngine,
    WaitService,
    PersistedWaitSweeper,
    WaitMetrics,
    EventFeedService,
  ],
  exports: [WaitService, EventFeedService, WaitEngine, WaiterRegistry, PersistedWaitRepository, PersistedWaitSweeper],
})
export class WaitsModule {}
