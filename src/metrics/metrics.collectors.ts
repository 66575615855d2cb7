import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { TaskEntity, TaskStatus } from '../tasks/task.entity';
import { WaiterRegistry } from '../waits/waiter-registry';
import { Metrics } from './metrics';

const TASK_STATUSES: readonly TaskStatus[] = ['working', 'input_required', 'completed', 'failed', 'cancelled'];

/** A scrape waits at most this long for the database: /metrics must answer during an outage. */
const SCRAPE_QUERY_TIMEOUT_MS = 1500;

/** A scrape-time query cut off after SCRAPE_QUERY_TIMEOUT_MS (for collectors of other modules too). */
export function withinTimeout<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('database query timed out')), SCRAPE_QUERY_TIMEOUT_MS);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** Gauges read at scrape time from live state: nothing is counted twice, nothing drifts. */
@Injectable()
export class MetricsCollectors {
  constructor(metrics: Metrics, waiters: WaiterRegistry, @InjectDataSource() dataSource: DataSource) {
    new Gauge({
      name: 'alcarta_active_waits',
      help:
        'Waits parked in this process by kind (message, request) and delivery: poll (a blocking call), ' +
        'websocket (an open socket), persisted (a stored wait this process owns and watches; one replica each).',
      labelNames: ['kind', 'delivery'],
      registers: [metrics.registry],
      collect() {
        for (const { kind, delivery, count } of waiters.counts()) this.set({ kind, delivery }, count);
      },
    });
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
    new Gauge({
      name: 'alcarta_tasks',
      help: 'MCP tasks in the database (all replicas) by status.',
      labelNames: ['status'],
      registers: [metrics.registry],
      async collect() {
        const query = dataSource
          .getRepository(TaskEntity)
          .createQueryBuilder('t')
          .select('t.status', 'status')
          .addSelect('count(*)::int', 'count')
          .groupBy('t.status')
          .getRawMany<{ status: TaskStatus; count: number }>();
        // Without the database the last counts stay: alcarta_database_up says they are stale.
        const rows = await withinTimeout(query).catch(() => undefined);
        if (!rows) return;
        for (const status of TASK_STATUSES) this.set({ status }, rows.find((r) => r.status === status)?.count ?? 0);
      },
    });
  }
}
