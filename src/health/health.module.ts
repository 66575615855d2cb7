import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { EventsModule } from '../events/events.module';
import { HealthController } from './health.controller';
import { ReadinessIndicator } from './readiness.indicator';

@Module({
  imports: [TerminusModule.forRoot({ errorLogStyle: 'json', logger: false }), EventsModule],
  controllers: [HealthController],
  providers: [ReadinessIndicator],
})
export class HealthModule {}
