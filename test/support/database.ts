import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

export interface TestDatabase {
  url: string;
  /** Runs SQL against this test database (for assertions on what is stored). */
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<R[]>;
  drop(): Promise<void>;
}

function serverUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run the tests through `npm test`');
  return url;
}

/** A fresh, empty database on the test server, so test files never see each other's rows. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `alcarta_test_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: serverUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  // One session (tests use BEGIN/COMMIT through it); concurrent calls are queued here, in order.
  const client = new Client({ connectionString: url.toString() });
  await client.connect();
  let queue: Promise<unknown> = Promise.resolve();
  const query = <R>(sql: string, params: unknown[] = []): Promise<R[]> => {
    const run = queue.then(() => client.query(sql, params));
    queue = run.catch(() => undefined);
    return run.then((result) => result.rows as R[]);
  };
  return {
    url: url.toString(),
    query,
    drop: async () => {
      await queue;
      await client.end();
      const again = new Client({ connectionString: serverUrl() });
      await again.connect();
      try {
        await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await again.end();
      }
    },
  };
}
