import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import { withinTimeout } from '../metrics/scrape-timeout';
import { TASK_STATUSES } from './task.entity';
import { TaskRepository } from './task.repository';

/**
 * The tasks' gauge, read from the database at scrape time (every replica reports the same shared
 * numbers). During a database outage the last counts stay: `alcarta_database_up` says they are stale.
 */
@Injectable()
export class TaskMetrics {
  constructor(metrics: Metrics, tasks: TaskRepository) {
    new Gauge({
      name: 'alcarta_tasks',
      help: 'MCP tasks in the database (all replicas) by status.',
      labelNames: ['status'],
      registers: [metrics.registry],
      async collect() {
        const counts = await withinTimeout(tasks.countsByStatus()).catch(() => undefined);
        if (!counts) return;
        for (const status of TASK_STATUSES) this.set({ status }, counts.get(status) ?? 0);
      },
    });
  }
}
