import { Injectable, Logger } from '@nestjs/common';
import { Client } from 'pg';
import { AppConfig } from '../config/app-config';
import { CONNECT_TIMEOUT_MS } from '../database/bounded-pool';
import { Metrics } from '../metrics/metrics';
import { decodeDoorbell, Doorbell, DOORBELL_CHANNEL } from './doorbell';
import { BackgroundJob, Job } from '../lifecycle/background-job';

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5_000;

export interface ListenerSession {
  pid: number;
  /** `backend_start` as PostgreSQL prints it: exact to the microsecond (a Date would round it). */
  startedAt: string;
}

export interface DoorbellSubscriber {
  /** A change committed somewhere (any replica): a mailbox, a request, a wait, a credential, a call. */
  onDoorbell(bell: Doorbell): void;
  /** The listener (re)connected: notifications sent while it was away are lost, re-read the truth. */
  onListenerReconnected?(): void;
}

/**
 * The process's one `LISTEN alcarta_events` connection, outside the pool so that it is never
 * borrowed by a query and never holds a transaction open (which would block NOTIFY queue cleanup).
 * When the connection drops it reconnects by itself with backoff; once listening again it tells the
 * subscriber, because PostgreSQL does not replay notifications missed in between.
 */
@Job('listen')
@Injectable()
export class DoorbellListener implements BackgroundJob {
  private readonly logger = new Logger(DoorbellListener.name);
  private client: Client | undefined;
  private readonly subscribers: DoorbellSubscriber[] = [];
  private stopped = false;
  private retryMs = RETRY_MIN_MS;
  private retryTimer: NodeJS.Timeout | undefined;
  private everConnected = false;
  /** Times the connection was re-established after a loss (for metrics and tests). */
  reconnects = 0;
  /**
   * The database session listening now (its backend pid and start time), while connected. Other
   * replicas read it in `pg_stat_activity` to see at once that this process is gone (the wait
   * leases of the waits module).
   */
  session: ListenerSession | undefined;

  constructor(
    private readonly config: AppConfig,
    private readonly metrics: Metrics,
  ) {}

  get connected(): boolean {
    return this.client !== undefined;
  }

  subscribe(subscriber: DoorbellSubscriber): void {
    this.subscribers.push(subscriber);
  }

  /** Connects and listens; resolves once listening (startup fails fast if the database is down). */
  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    this.session = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new Client({
      connectionString: this.config.databaseUrl,
      application_name: 'alcarta-doorbell',
      keepAlive: true,
      // A reconnect to a host that does not answer must end, or it would retry never and keep
      // the process from exiting.
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    client.on('notification', (msg) => {
      const bell = msg.channel === DOORBELL_CHANNEL && msg.payload ? decodeDoorbell(msg.payload) : undefined;
      if (bell) for (const s of this.subscribers) s.onDoorbell(bell);
    });
    let session: ListenerSession;
    try {
      await client.connect();
      await client.query(`LISTEN ${DOORBELL_CHANNEL}`);
      const { rows } = await client.query<{ pid: number; backend_start: string }>(
        `SELECT pid, backend_start::text AS backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`,
      );
      session = { pid: rows[0].pid, startedAt: rows[0].backend_start };
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.stopped) {
      await client.end();
      return;
    }
    this.client = client;
    this.session = session;
    this.retryMs = RETRY_MIN_MS;
    if (this.everConnected) {
      this.reconnects++;
      this.metrics.listenerReconnects.inc();
      this.logger.log('doorbell listener reconnected');
      for (const s of this.subscribers) s.onListenerReconnected?.();
    }
    this.everConnected = true;
  }

  private lost(client: Client, err?: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.session = undefined;
    client.removeAllListeners('notification');
    void client.end().catch(() => undefined);
    if (this.stopped) return;
    this.logger.warn({ msg: 'doorbell listener lost its connection', error: err?.message });
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.connect().catch((err: Error) => {
        this.logger.warn({ msg: 'doorbell listener could not reconnect', error: err.message, retry_ms: this.retryMs });
        this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
        this.scheduleReconnect();
      });
    }, this.retryMs);
  }
}
