import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { Metrics } from './metrics';
import { withinTimeout } from './scrape-timeout';

/**
 * The gauges of the process itself, read at scrape time. Feature modules register their own
 * (WaitMetrics, TaskMetrics, OutboxMetrics, ConsoleMetrics) with the same registry, so this module
 * depends on none of them.
 */
@Injectable()
export class MetricsCollectors {
  constructor(metrics: Metrics, @InjectDataSource() dataSource: DataSource) {
    new Gauge({
      name: 'alcarta_database_up',
      help: 'Whether this process reaches PostgreSQL (1) or not (0), checked at scrape time.',
      registers: [metrics.registry],
      async collect() {
        const up = await withinTimeout(dataSource.query('SELECT 1')).then(
          () => 1,
          () => 0,
        );
        this.set(up);
      },
    });
  }
}
