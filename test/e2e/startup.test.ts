import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { callOk, connectMcp, rawMcp } from '../support/mcp';
import { createTestDatabase, TestDatabase } from '../support/database';
import { RestClient } from '../support/rest';
import { launchServer, runCli, scrubbed, secretsIn, spawnServer, SpawnedServer } from '../support/spawned-server';
import { randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { MIGRATION_LOCK_KEY } from '#app/database/migration-runner.js';

const GRACE_SECONDS = 10;

/**
 * Start-up as operators run it (docs/operators.md): the server as a real process (`node
 * dist/main.js`, or src/main.ts from source). The bootstrap admin token, JSON logs without secrets,
 * ALCARTA_MIGRATIONS=off, graceful exit on signals, and the embedded PostgreSQL used when
 * DATABASE_URL is unset.
 */
describe('server process start-up', () => {
  const databases: TestDatabase[] = [];
  const servers: SpawnedServer[] = [];

  const freshDatabase = async () => {
    const db = await createTestDatabase();
    databases.push(db);
    return db;
  };
  const start = async (env: Record<string, string | undefined>) => {
    const server = await spawnServer({ ALCARTA_SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS), ...env });
    servers.push(server);
    return server;
  };
  const stop = async (server: SpawnedServer, signal: NodeJS.Signals = 'SIGTERM') => {
    const code = await server.stop(signal);
    assert.equal(code, 0, `exit code after ${signal}; stderr:\n${scrubbed(server.stderr())}`);
  };
  const createMailbox = async (url: string, secret: string, address: string) => {
    const res = await new RestClient(url, secret).post('/v1/mailboxes', { address });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.mailbox_id as string;
  };

  after(async () => {
    for (const server of servers) await server.stop('SIGTERM');
    for (const db of databases) await db.drop();
  });

  it('on a database without tokens, prints one admin secret on stderr, once', async () => {
    const db = await freshDatabase();
    const first = await start({ DATABASE_URL: db.url, ALCARTA_BOOTSTRAP_TOKEN: undefined });
    await waitFor('the banner', () => secretsIn(first.stderr()).length > 0);
    const printed = secretsIn(first.stderr());
    assert.equal(printed.length, 1, 'exactly one secret in the banner on stderr');
    assert.deepEqual(secretsIn(first.stdout()), [], 'no secret on stdout');
    const [secret] = printed;
    await createMailbox(first.url, secret, 'bootstrap@example.com');
    await stop(first);
    assert.deepEqual(secretsIn(first.stderr()), [secret], 'the banner is the only place the secret was printed');
    assert.deepEqual(secretsIn(first.stdout()), []);

    const second = await start({ DATABASE_URL: db.url, ALCARTA_BOOTSTRAP_TOKEN: undefined });
    const list = await new RestClient(second.url, secret).get('/v1/mailboxes');
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.mailboxes.map((m: { address: string }) => m.address),
      ['bootstrap@example.com'],
    );
    await stop(second);
    assert.deepEqual(secretsIn(second.stderr() + second.stdout()), [], 'nothing printed after a restart');
    const tokens = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM tokens');
    assert.equal(tokens[0].n, 1, 'one bootstrap token, not one per start');
  });

  it('with ALCARTA_BOOTSTRAP_TOKEN, that secret is the admin token and nothing is printed', async () => {
    const db = await freshDatabase();
    const secret = randomSecret();
    const server = await start({ DATABASE_URL: db.url, ALCARTA_BOOTSTRAP_TOKEN: secret });
    await createMailbox(server.url, secret, 'preset@example.com');
    await stop(server);
    assert.deepEqual(secretsIn(server.stdout()), []);
    assert.deepEqual(secretsIn(server.stderr()), []);
  });

  it('logs JSON lines on stdout and never a secret, whatever the requests carry', async () => {
    const db = await freshDatabase();
    const adminSecret = randomSecret();
    const server = await start({
      DATABASE_URL: db.url,
      ALCARTA_BOOTSTRAP_TOKEN: adminSecret,
      ALCARTA_LOG_LEVEL: 'trace',
    });
    const admin = new RestClient(server.url, adminSecret);
    const sent = [adminSecret];

    const mailboxId = await createMailbox(server.url, adminSecret, 'logs@example.com');
    const created = await admin.post('/v1/tokens', { name: 'agent', scopes: ['mail:read'], mailboxes: [mailboxId] });
    assert.equal(created.status, 201);
    const agentSecret = created.body.secret as string;
    sent.push(agentSecret);
    const agent = await connectMcp(server.url, agentSecret);
    try {
      await callOk(agent, 'list_mailboxes');
      // An agent pasting a secret where an id belongs gets not_found; the secret must not be logged.
      await agent.callTool({ name: 'get_message', arguments: { message_id: adminSecret } });
    } finally {
      await agent.close();
    }
    assert.equal((await admin.get('/v1/tokens')).status, 200);
    assert.equal((await admin.delete(`/v1/tokens/${created.body.token_id}`)).status, 204);
    assert.equal((await admin.withToken(agentSecret).get('/v1/mailboxes')).status, 401, 'revoked');
    assert.equal((await rawMcp(server.url, agentSecret, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).status, 401);

    const invalid = randomSecret();
    sent.push(invalid);
    assert.equal((await admin.withToken(invalid).get('/v1/mailboxes')).status, 401);
    assert.equal((await rawMcp(server.url, invalid, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).status, 401);
    const inQuery = randomSecret();
    sent.push(inQuery);
    assert.equal((await admin.get(`/v1/mailboxes?access_token=${inQuery}`)).status, 200);
    const malformed = randomSecret();
    sent.push(malformed);
    const res = await fetch(`${server.url}/v1/mailboxes`, { headers: { authorization: `Bearer ${malformed} extra` } });
    assert.equal(res.status, 401);
    await res.text();

    await stop(server);
    const lines = server
      .stdout()
      .split('\n')
      .filter((line) => line.trim() !== '');
    assert.ok(lines.length > 5, 'the server logged its start and the requests');
    for (const line of lines) {
      let entry: Record<string, unknown>;
      assert.doesNotThrow(() => (entry = JSON.parse(line) as Record<string, unknown>), `not JSON: ${scrubbed(line)}`);
      assert.equal(typeof entry!.level, 'string', scrubbed(line));
      assert.equal(typeof entry!.time, 'string', scrubbed(line));
      assert.equal(typeof entry!.msg, 'string', scrubbed(line));
    }
    assert.ok(
      lines.some((l) => l.includes('"/v1/mailboxes"')),
      'requests are logged (so the check below is meaningful)',
    );
    const output = server.stdout() + server.stderr();
    for (const [i, secret] of sent.entries()) {
      assert.equal(output.includes(secret), false, `secret #${i} appears in the output`);
      assert.equal(output.includes(secret.slice(4)), false, `the body of secret #${i} appears in the output`);
    }
    assert.deepEqual(secretsIn(output), []);
  });

  it('with ALCARTA_MIGRATIONS=off, refuses an unmigrated database; `cli migrate` makes the start succeed', async () => {
    const db = await freshDatabase();
    const secret = randomSecret();
    const env = { DATABASE_URL: db.url, ALCARTA_MIGRATIONS: 'off', ALCARTA_BOOTSTRAP_TOKEN: secret };
    const refused = await launchServer(env);
    servers.push(refused);
    const code = await refused.exited;
    assert.notEqual(code, 0, 'the start fails');
    assert.match(refused.stderr(), /migrat/i, 'the message says the schema needs migrating');
    assert.match(refused.stderr(), /cli.* migrate/, 'and how to do it');
    const tables = await db.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`);
    assert.deepEqual(tables, [], 'no tables were created');

    const migrate = await runCli(['migrate'], { DATABASE_URL: db.url });
    assert.equal(migrate.code, 0, migrate.stderr);

    const server = await start(env);
    await createMailbox(server.url, secret, 'migrated@example.com');
    await stop(server);
  });

  it('a replica waiting for another one’s migrations does not block its index builds (CREATE INDEX CONCURRENTLY)', async () => {
    const db = await freshDatabase();
    // This test's session plays the replica that migrates: it holds the migration lock.
    await db.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const waiting = await launchServer({ DATABASE_URL: db.url, ALCARTA_BOOTSTRAP_TOKEN: randomSecret() });
    servers.push(waiting);
    await waitFor('the second replica asking for the migration lock', async () => {
      const [{ n }] = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE '%advisory_lock%'`,
      );
      return n > 0;
    });
    // An index build waits for every older snapshot: a replica blocked in pg_advisory_lock holds one.
    await db.query(`SET statement_timeout = '15s'`);
    await db.query('CREATE TABLE migration_probe (x int)');
    await db.query('CREATE INDEX CONCURRENTLY migration_probe_x ON migration_probe (x)');
    await db.query('RESET statement_timeout');
    await db.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    await waitFor('the second replica to migrate and start', async () => {
      const res = await fetch(`${waiting.url}/health/ready`).catch(() => undefined);
      return res?.status === 200;
    });
    await stop(waiting);
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} ends the process with status 0 within ALCARTA_SHUTDOWN_GRACE_SECONDS`, async () => {
      const db = await freshDatabase();
      const server = await start({ DATABASE_URL: db.url, ALCARTA_BOOTSTRAP_TOKEN: randomSecret() });
      const started = Date.now();
      await stop(server, signal);
      // The process forces exit 1 when the grace period runs out, so status 0 already proves it.
      assert.ok(Date.now() - started < (GRACE_SECONDS + 5) * 1000);
      assert.match(server.stdout(), /"msg":"stopped"/);
    });
  }

  describe('embedded PostgreSQL (DATABASE_URL unset)', () => {
    let dataDir: string | undefined;

    after(async () => {
      if (dataDir) await rm(dataDir, { recursive: true, force: true });
    });

    /** The postmaster of the cluster under `dataDir`, if one is still running. */
    const postmasterAlive = async (): Promise<boolean> => {
      const pidFile = join(dataDir!, 'pgdata', 'postmaster.pid');
      if (!existsSync(pidFile)) return false;
      const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
      try {
        process.kill(pid, 0);
        return true;
      } catch (err) {
        return (err as NodeJS.ErrnoException).code === 'EPERM';
      }
    };

    it('starts its own cluster, keeps data between runs, lets the CLI attach, and stops it on exit', async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'alcarta-embedded-'));
      await chmod(dataDir, 0o755); // as root, the postgres OS user must traverse it
      const env = { DATABASE_URL: undefined, ALCARTA_BOOTSTRAP_TOKEN: undefined, ALCARTA_DATA_DIR: dataDir };

      const first = await start(env);
      await waitFor('the banner', () => secretsIn(first.stderr()).length > 0);
      const printed = secretsIn(first.stderr());
      assert.equal(printed.length, 1, 'the fresh cluster gets a bootstrap admin token');
      const [secret] = printed;
      const mailboxId = await createMailbox(first.url, secret, 'embedded@example.com');
      assert.ok(existsSync(join(dataDir, 'pgdata', 'PG_VERSION')), 'the cluster lives under ALCARTA_DATA_DIR');

      const cli = await runCli(['mailboxes', 'list', '--json'], env);
      assert.equal(cli.code, 0, scrubbed(cli.stderr));
      assert.deepEqual(
        (JSON.parse(cli.stdout) as { mailboxes: Array<{ mailbox_id: string }> }).mailboxes.map((m) => m.mailbox_id),
        [mailboxId],
      );
      const ready = await fetch(`${first.url}/health/ready`);
      assert.equal(ready.status, 200, 'the CLI leaves the server its cluster');
      await ready.text();

      await stop(first);
      assert.equal(await postmasterAlive(), false, 'no postgres process stays behind');

      const second = await start(env);
      assert.deepEqual(secretsIn(second.stderr() + second.stdout()), [], 'no second banner');
      const list = await new RestClient(second.url, secret).get('/v1/mailboxes');
      assert.equal(list.status, 200);
      assert.deepEqual(
        list.body.mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id),
        [mailboxId],
      );
      await stop(second);
      assert.equal(await postmasterAlive(), false, 'no postgres process stays behind');
    });
  });
});
