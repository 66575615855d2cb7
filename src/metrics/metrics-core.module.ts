import { Global, Module } from '@nestjs/common';
import { Metrics } from './metrics';

/** The registry every module records into; global so that recording never creates module cycles. */
@Global()
@Module({ providers: [Metrics], exports: [Metrics] })
export class MetricsCoreModule {}
