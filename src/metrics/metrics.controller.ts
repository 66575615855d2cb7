import { Controller, Get, Header } from '@nestjs/common';
import { Public } from '../kernel/route-decorators';
import { Metrics } from './metrics';
import { MetricsCollectors } from './metrics.collectors';

@Controller('metrics')
@Public()
export class MetricsController {
  constructor(
    private readonly metrics: Metrics,
    // Instantiated so that its gauges are registered.
    _collectors: MetricsCollectors,
  ) {}

  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  render(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
