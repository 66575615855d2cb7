import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { TaskEntity, TaskStatus } from '../tasks/task.entity';
import { WaiterRegistry } from '../waits/waiter-registry';
import { Metrics } from './metrics';

const TASK_STATUSES: readonly TaskStatus[] = ['working', 'input_required', 'completed', 'failed', 'cancelled'];

/** Gauges read at scrape time from live state: nothing is counted twice, nothing drifts. */
@Injectable()
export class MetricsCollectors {
  constructor(metrics: Metrics, waiters: WaiterRegistry, @InjectDataSource() dataSource: DataSource) {
    new Gauge({
      name: 'alcarta_active_waits',
      help:
        'Waits parked in this process by kind (message, request) and delivery: poll (a blocking call), ' +
        'websocket (an open socket), persisted (a stored wait this process watches; every replica does).',
      labelNames: ['kind', 'delivery'],
      registers: [metrics.registry],
      collect() {
        for (const { kind, delivery, count } of waiters.counts()) this.set({ kind, delivery }, count);
      },
    });
    new Gauge({
      name: 'alcarta_tasks',
      help: 'MCP tasks in the database (all replicas) by status.',
      labelNames: ['status'],
      registers: [metrics.registry],
      async collect() {
        const rows = await dataSource
          .getRepository(TaskEntity)
          .createQueryBuilder('t')
          .select('t.status', 'status')
          .addSelect('count(*)::int', 'count')
          .groupBy('t.status')
          .getRawMany<{ status: TaskStatus; count: number }>();
        for (const status of TASK_STATUSES) this.set({ status }, rows.find((r) => r.status === status)?.count ?? 0);
      },
    });
  }
}
