import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { Public } from '../kernel/route-decorators';
import { ReadinessIndicator } from './readiness.indicator';

@Controller('health')
@Public()
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: TypeOrmHealthIndicator,
    private readonly readiness: ReadinessIndicator,
  ) {}

  /** The process is up and serving HTTP; nothing external is checked (a restart would not help). */
  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([]);
  }

  /** Send traffic here: the database answers, the doorbell listener is connected, not draining. */
  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([...this.readiness.check(), () => this.database.pingCheck('database').withTimeout(2000)]);
  }
}
