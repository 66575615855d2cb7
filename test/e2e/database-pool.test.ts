import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from 'pg';
import { CONNECT_TIMEOUT_MS } from '#app/database/bounded-pool.js';
import { RestResponse } from '../support/rest';
import { TcpProxy } from '../support/tcp-proxy';
import { startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const POOL_SIZE = 2;
/** More requests than pooled connections, so most of them queue in the pool. */
const REQUESTS = 8;
/** docs/operators.md "Limits and hardening": no call hangs longer than this while PostgreSQL is unreachable. */
const MAX_CALL_MS = 5000;

/**
 * The pool's two bounds: a burst that waits for a free connection longer than a connect may take
 * is served, not answered 503 as if PostgreSQL were down; and with PostgreSQL unreachable (a
 * connect that hangs, not one that is refused: see database-outage.test.ts for that) every
 * request, queued ones included, is still a 503 within seconds.
 */
describe('database pool under load and during an outage', () => {
  let proxy: TcpProxy;
  let server: TestServer;
  let locker: Client;

  before(async () => {
    const pg = new URL(process.env.DATABASE_URL!);
    proxy = await TcpProxy.start({ host: pg.hostname, port: Number(pg.port || 5432) });
    server = await startTestServer({ env: { ALCARTA_DB_POOL_SIZE: String(POOL_SIZE) } });
    locker = new Client({ connectionString: server.db.url });
    await locker.connect();
  });

  after(async () => {
    await locker?.end();
    await server?.close();
    await proxy?.close();
  });

  it('queues a burst behind a busy pool for longer than a connect may take, and serves it', async () => {
    // A lock held from outside: the server's statements on mailboxes wait for it, holding every
    // pooled connection, and the rest of the burst queues in the pool.
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE mailboxes IN ACCESS EXCLUSIVE MODE');
    const started = Date.now();
    const burst = Array.from({ length: REQUESTS }, () => server.admin.get('/v1/mailboxes'));
    await waitFor('every pooled connection to wait for the lock', async () => {
      const [row] = await server.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'alcarta' AND wait_event_type = 'Lock'`,
      );
      return row.n === POOL_SIZE;
    });
    // Held by PostgreSQL itself, past the connect bound (the old single bound of the pool queue).
    await locker.query('SELECT pg_sleep($1)', [(CONNECT_TIMEOUT_MS + 1000) / 1000]);
    await locker.query('COMMIT');
    const answers: RestResponse[] = await Promise.all(burst);
    assert.ok(Date.now() - started > CONNECT_TIMEOUT_MS, 'the burst queued longer than a connect may take');
    assert.deepEqual(
      answers.map((a) => a.status),
      answers.map(() => 200),
      JSON.stringify(answers.find((a) => a.status !== 200)?.body),
    );
  });

  it('answers 503 within seconds to every request, queued ones included, while connects hang', async () => {
    // A second server reaching PostgreSQL through the relay, which then stops answering.
    const viaProxy = await startTestServer({
      db: server.db,
      adminToken: server.adminToken,
      env: { ALCARTA_DB_POOL_SIZE: String(POOL_SIZE), DATABASE_URL: proxy.rewrite(server.db.url) },
    });
    try {
      assert.equal((await viaProxy.admin.get('/v1/mailboxes')).status, 200);
      proxy.blackhole();
      const answers = await Promise.all(
        Array.from({ length: REQUESTS }, async () => {
          const t0 = Date.now();
          const res = await viaProxy.admin.get('/v1/mailboxes');
          return { status: res.status, error: res.body?.error, ms: Date.now() - t0 };
        }),
      );
      for (const a of answers) {
        assert.equal(a.status, 503, JSON.stringify(a));
        assert.equal(a.error, 'unavailable');
        assert.ok(a.ms < MAX_CALL_MS, `answered after ${a.ms} ms`);
      }
    } finally {
      await viaProxy.close({ keepDatabase: true });
    }
  });
});
