import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DataSource } from 'typeorm';
import { getDataSourceToken } from '@nestjs/typeorm';
import { startTestServer, TestServer } from '../support/test-server';

/**
 * The schema is owned by the migrations, the entities describe it for TypeORM: if they drift apart,
 * TypeORM would read or write columns that do not exist. A migrated database must need no changes.
 */
describe('database schema', () => {
  let server: TestServer;

  before(async () => {
    server = await startTestServer();
  });

  after(async () => {
    await server?.close();
  });

  it('the migrations create exactly the schema the entities describe', async () => {
    const dataSource = server.running.app.get<DataSource>(getDataSourceToken());
    const pending = await dataSource.driver.createSchemaBuilder().log();
    assert.deepEqual(
      pending.upQueries.map((q) => q.query),
      [],
    );
  });

  it('records applied migrations, so a restart applies nothing again', async () => {
    const rows = await server.db.query<{ name: string }>('SELECT name FROM schema_migrations');
    assert.ok(rows.length >= 1);
    const dataSource = server.running.app.get<DataSource>(getDataSourceToken());
    assert.equal(await dataSource.showMigrations(), false);
  });
});
