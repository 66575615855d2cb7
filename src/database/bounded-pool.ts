import pg, { Client, ClientConfig, Pool, PoolClient, PoolConfig } from 'pg';
import { classifyDatabaseError } from './database-errors';

/**
 * How long opening one connection may take (TCP, TLS, start-up, authentication): while
 * PostgreSQL is unreachable a request fails within seconds (503) instead of hanging.
 */
export const CONNECT_TIMEOUT_MS = 3000;

/**
 * How long a statement may wait in the pool's queue for a free connection while all of them are
 * busy. A burst (hundreds of waits opened at once, a large ingest) queues for longer than a
 * connect may take and must not be answered 503 as if PostgreSQL were down.
 */
export const POOL_QUEUE_TIMEOUT_MS = 30_000;

type ConnectCallback = (
  err: Error | undefined,
  client: PoolClient | undefined,
  done: (release?: unknown) => void,
) => void;

/**
 * pg's Client with its own connect timeout. pg-pool hands every client the pool's options, whose
 * `connectionTimeoutMillis` is the pool's queue bound (POOL_QUEUE_TIMEOUT_MS); pg's Client
 * timer on the same option, set here, destroys a socket that has not finished connecting.
 *
 * It also lets go of a session as soon as PostgreSQL ends it. A terminated session (a fast
 * shutdown, a restart, pg_terminate_backend, a failover tool) gets a FATAL error, and its socket
 * closes only when the backend has exited, milliseconds later. Meanwhile pg still calls the client
 * queryable: released to the pool after the failed statement, it would be handed to the next
 * caller, whose statement then fails too ("Connection terminated unexpectedly"). Ended at once,
 * the client is dropped by the pool on release.
 */
class ConnectBoundedClient extends Client {
  constructor(config: ClientConfig = {}) {
    super({ ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    // After connecting, so pg's own handler (registered by connect()) fails the statement first.
    this.once('connect', () =>
      this.connection.on('errorMessage', (message: { severity?: string }) => {
        if (message.severity === 'FATAL' || message.severity === 'PANIC') this.end().catch(() => undefined);
      }),
    );
  }
}

/**
 * pg's Pool with two bounds where pg-pool has one. pg-pool's `connectionTimeoutMillis` bounds
 * both opening a connection and waiting in the queue for a free one; here it is the long queue
 * bound, and ConnectBoundedClient bounds the connect.
 *
 * A long queue bound alone would let an outage look like a burst: when a connect fails, pg-pool
 * starts the next queued caller's connect only then, so with PostgreSQL blackholed the queue
 * drains one CONNECT_TIMEOUT_MS per pool slot at a time. So the first connect that fails
 * because PostgreSQL cannot be reached fails every caller still waiting, at once, with that
 * error (503 upstream). Their places in pg-pool's queue stay; a connection handed to a caller
 * that has already failed goes straight back to the pool.
 */
export class BoundedPool extends Pool {
  private readonly waiting = new Set<(err: Error) => void>();

  constructor(config: PoolConfig) {
    super({ ...config, connectionTimeoutMillis: POOL_QUEUE_TIMEOUT_MS, Client: ConnectBoundedClient });
  }

  override connect(): Promise<PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<PoolClient> | void {
    if (!callback) {
      return new Promise((resolve, reject) =>
        this.connect((err, client) => (client ? resolve(client) : reject(err ?? new Error('no client from the pool')))),
      );
    }
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      this.waiting.delete(fail);
      callback(err, undefined, () => undefined);
    };
    this.waiting.add(fail);
    super.connect((err, client, done) => {
      this.waiting.delete(fail);
      if (settled) {
        if (client) done();
        return;
      }
      settled = true;
      if (err && failedToConnect(err)) for (const other of [...this.waiting]) other(err);
      callback(err, client, done);
    });
  }
}

/** pg-pool's own error for a caller that waited POOL_QUEUE_TIMEOUT_MS in the queue. */
const QUEUE_TIMEOUT_MESSAGE = 'timeout exceeded when trying to connect';

/**
 * Whether `err` says that PostgreSQL cannot be reached. A caller that waited out the queue bound
 * says only that the pool was busy: the callers behind it have waited less and keep waiting.
 */
function failedToConnect(err: Error): boolean {
  return err.message !== QUEUE_TIMEOUT_MESSAGE && classifyDatabaseError(err) === 'unavailable';
}

/** The `pg` module as TypeORM's postgres driver sees it, with BoundedPool as its Pool. */
export const boundedPg = Object.create(pg, { Pool: { value: BoundedPool } }) as typeof pg;
