import { Module } from '@nestjs/common';
import { WaitsModule } from '../waits/waits.module';
import { MetricsCollectors } from './metrics.collectors';
import { MetricsController } from './metrics.controller';

@Module({
  imports: [WaitsModule],
  controllers: [MetricsController],
  providers: [MetricsCollectors],
})
export class MetricsModule {}
