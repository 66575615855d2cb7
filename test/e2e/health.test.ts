import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from 'pg';
import { startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/**
 * The health endpoints (docs/operators.md) in @nestjs/terminus format: liveness says the process
 * serves HTTP, readiness that the database answers. Readiness must fail while the database is
 * unreachable and recover on its own when it is back; liveness must not follow it (a restart would
 * not help).
 */
describe('health endpoints', () => {
  let server: TestServer;
  let admin: Client;
  let dbName: string;

  const get = async (path: string) => {
    const res = await fetch(`${server.url}${path}`);
    const text = await res.text();
    return { status: res.status, contentType: res.headers.get('content-type') ?? '', body: JSON.parse(text) };
  };

  /** Makes the server's database unreachable: refuse new connections and cut the server's existing ones. */
  const cutDatabase = async () => {
    await admin.query(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS false`);
    await admin.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'alcarta'`,
      [dbName],
    );
  };
  const restoreDatabase = () => admin.query(`ALTER DATABASE ${dbName} ALLOW_CONNECTIONS true`);

  before(async () => {
    server = await startTestServer();
    dbName = new URL(server.db.url).pathname.slice(1);
    admin = new Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
  });

  after(async () => {
    if (admin) {
      await restoreDatabase().catch(() => undefined);
      await admin.end();
    }
    await server?.close();
  });

  it('GET /health/live needs no token and answers 200 {status: "ok"}', async () => {
    const res = await get('/health/live');
    assert.equal(res.status, 200);
    assert.match(res.contentType, /^application\/json/);
    assert.equal(res.body.status, 'ok');
  });

  it('GET /health/ready needs no token and reports the database up', async () => {
    const res = await get('/health/ready');
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'ok');
    assert.equal(res.body.details.database.status, 'up');
    assert.equal(res.body.info.database.status, 'up');
  });

  it('readiness answers 503 while the database is unreachable and recovers; liveness stays 200', async () => {
    await cutDatabase();
    try {
      const down = await waitFor(
        'readiness to fail',
        async () => {
          const res = await get('/health/ready');
          return res.status === 503 ? res : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      assert.equal(down.body.status, 'error');
      assert.equal(down.body.details.database.status, 'down');
      assert.equal(down.body.error.database.status, 'down');

      const live = await get('/health/live');
      assert.equal(live.status, 200);
      assert.equal(live.body.status, 'ok');
    } finally {
      await restoreDatabase();
    }

    const up = await waitFor(
      'readiness to recover',
      async () => {
        const res = await get('/health/ready');
        return res.status === 200 ? res : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    assert.equal(up.body.status, 'ok');
    assert.equal(up.body.details.database.status, 'up');
    assert.equal((await get('/health/live')).status, 200);
    // The application itself works again, not only the health check.
    assert.equal((await server.admin.get('/v1/mailboxes')).status, 200);
  });
});
