import { Module } from '@nestjs/common';
import { MetricsCollectors } from './metrics.collectors';
import { MetricsController } from './metrics.controller';

/** GET /metrics: renders the registry every module records into (see MetricsCoreModule). */
@Module({
  controllers: [MetricsController],
  providers: [MetricsCollectors],
})
export class MetricsModule {}
