import { Module } from '@nestjs/common';
import { WaitsModule } from '../waits/waits.module';
import { MetricsController } from './metrics.controller';
import { MetricsService } from './metrics.service';

@Module({
  imports: [WaitsModule],
  controllers: [MetricsController],
  providers: [MetricsService],
})
export class MetricsModule {}
