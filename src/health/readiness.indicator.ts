import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { DoorbellListener } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';

/** This replica takes new work: it is not draining and hears doorbells (else its waits would lag). */
@Injectable()
export class ReadinessIndicator {
  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly drain: DrainState,
    private readonly listener: DoorbellListener,
  ) {}

  check() {
    const draining = this.indicators.check('shutdown');
    const listener = this.indicators.check('doorbell_listener');
    return [
      () => (this.drain.isDraining ? draining.down({ draining: true }) : draining.up({ draining: false })),
      () => (this.listener.connected ? listener.up() : listener.down({ message: 'not connected' })),
    ];
  }
}
