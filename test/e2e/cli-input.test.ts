import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CliResult, runCli, runCliWith } from '../support/cli';
import { createTestDatabase, TestDatabase } from '../support/database';
import { RestResponse } from '../support/rest';
import { startTestServer, TestServer } from '../support/test-server';

/**
 * The administrative CLI as a newcomer meets it: listings answer without loading the application
 * or migrating, create commands refuse what the REST API refuses with the REST API's message, and
 * an unquoted `*` that the shell turned into file names is explained instead of failing obscurely.
 */
describe('administrative CLI: listings, input checks, shell globs', () => {
  let db: TestDatabase;
  let server: TestServer | undefined;
  let dir: string;
  /** Preloaded into the CLI: reports on exit which framework packages it loaded. */
  let loadProbe: string;

  const count = async (table: 'tokens' | 'mailboxes' | 'grants') =>
    Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`))[0].n);
  const frameworksLoaded = (result: CliResult): string[] => {
    const line = /^loaded-frameworks: (.*)$/m.exec(result.stderr);
    assert.ok(line, `no probe output in: ${result.stderr}`);
    return JSON.parse(line[1]) as string[];
  };
  const probed = (...args: string[]) =>
    runCliWith({ env: { NODE_OPTIONS: `--require ${loadProbe}` } }, db.url, ...args);

  before(async () => {
    db = await createTestDatabase();
    dir = await mkdtemp(join(tmpdir(), 'alcarta-cli-'));
    loadProbe = join(dir, 'load-probe.cjs');
    await writeFile(
      loadProbe,
      `const Module = require('node:module');
       const load = Module._load;
       const seen = new Set();
       Module._load = function (request, ...rest) {
         if (/^(@nestjs\\/[^/]+|typeorm)$/.test(request)) seen.add(request);
         return load.call(this, request, ...rest);
       };
       process.on('exit', () => process.stderr.write('loaded-frameworks: ' + JSON.stringify([...seen]) + '\\n'));`,
    );
    // A project directory an operator might be in (Node reads a package.json it meets, so it is valid JSON).
    const files = { Dockerfile: 'FROM scratch\n', 'README.md': '# a project\n', 'package.json': '{}\n' };
    for (const [file, content] of Object.entries(files)) await writeFile(join(dir, file), content);
  });

  after(async () => {
    if (server) await server.close();
    else await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it('lists without loading the application and without migrating', async (t) => {
    const started = Date.now();
    const empty = await probed('mailboxes', 'list');
    t.diagnostic(`mailboxes list on a database without schema: ${Date.now() - started} ms`);
    assert.equal(empty.code, 0, empty.stderr);
    assert.equal(empty.stdout, '\n');
    assert.match(empty.stderr, /no Alcarta schema yet/);
    assert.deepEqual(frameworksLoaded(empty), []);
    const [{ table }] = await db.query<{ table: string | null }>(`SELECT to_regclass('schema_migrations') AS table`);
    assert.equal(table, null, 'a listing applied migrations');

    // The probe sees the frameworks where they are loaded: a command that changes something.
    const migrated = await probed('migrate');
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.ok(frameworksLoaded(migrated).includes('@nestjs/core'), migrated.stderr);

    server = await startTestServer({ db });
    const mailbox = await server.admin.post('/v1/mailboxes', { address: 'desk@example.com', name: 'Desk' });
    assert.equal(mailbox.status, 201);
    const token = await server.admin.post('/v1/tokens', {
      name: 'reader',
      scopes: ['mail:read'],
      mailboxes: [mailbox.body.mailbox_id],
      expires_at: '2099-01-01T00:00:00Z',
    });
    assert.equal(token.status, 201);
    assert.equal((await server.admin.post('/v1/grants', { principal: 'group:ops', mailboxes: ['*'] })).status, 201);
    for (const kind of ['mailboxes', 'tokens', 'grants']) {
      const begun = Date.now();
      const listed = await probed(kind, 'list', '--json');
      t.diagnostic(`${kind} list: ${Date.now() - begun} ms`);
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(frameworksLoaded(listed), [], kind);
      assert.deepEqual(
        JSON.parse(listed.stdout),
        (await server.admin.get(`/v1/${kind}`)).body,
        `${kind} as REST shows`,
      );
    }
    assert.match(
      (await runCli(db.url, 'tokens', 'list')).stdout,
      /^tok_\w+ {2}reader {2}scopes=mail:read {2}mailboxes=mbx_\w+ {2}expires=2099-01-01T00:00:00.000Z$/m,
    );
  });

  it('refuses what the REST API refuses, with its message, and creates nothing', async () => {
    const admin = server?.admin;
    assert.ok(admin, 'the previous test started the server');
    const cases: Array<{ path: string; body: Record<string, unknown>; args: string[] }> = [
      {
        path: '/v1/mailboxes',
        body: { address: 'not an address' },
        args: ['mailboxes', 'create', '--address', 'not an address'],
      },
      {
        path: '/v1/tokens',
        body: { name: 'x', scopes: ['mail:read', 'mail:write'], mailboxes: ['*'] },
        args: ['tokens', 'create', '--name', 'x', '--scopes', 'mail:read,mail:write', '--mailboxes', '*'],
      },
      {
        path: '/v1/grants',
        body: { principal: 'sub:a', mailboxes: [] },
        args: ['grants', 'create', '--principal', 'sub:a', '--mailboxes', ','],
      },
    ];
    const before = {
      mailboxes: await count('mailboxes'),
      tokens: await count('tokens'),
      grants: await count('grants'),
    };
    for (const { path, body, args } of cases) {
      const rest: RestResponse = await admin.post(path, body);
      assert.equal(rest.status, 400, path);
      const cli = await runCli(db.url, ...args);
      assert.equal(cli.code, 1, args.join(' '));
      assert.equal(
        cli.stderr,
        `error: ${rest.body.error} (${rest.body.reason}): ${rest.body.message}\n`,
        args.join(' '),
      );
    }
    assert.match(
      (await admin.post('/v1/mailboxes', { address: 'not an address' })).body.message,
      /^address must be an email address$/,
    );
    assert.deepEqual(
      { mailboxes: await count('mailboxes'), tokens: await count('tokens'), grants: await count('grants') },
      before,
    );
  });

  it('explains an unquoted * that the shell expanded into file names, and says to quote it', async () => {
    const before = { tokens: await count('tokens'), grants: await count('grants') };
    for (const command of [
      'tokens create --name all --scopes admin --mailboxes *',
      'grants create --principal group:ops --mailboxes *',
    ]) {
      const result = await runCliWith({ cwd: dir, shell: true }, db.url, command);
      assert.equal(result.code, 2, `${command}: ${result.stderr}`);
      assert.match(result.stderr, /^error: --mailboxes got file names \([^)]*(Dockerfile|README\.md)/m, command);
      assert.match(result.stderr, /Quote it: --mailboxes '\*'/, command);
    }
    const quoted = await runCliWith(
      { cwd: dir, shell: true },
      db.url,
      "grants create --principal group:all --mailboxes '*'",
    );
    assert.equal(quoted.code, 0, quoted.stderr);
    assert.deepEqual(
      { tokens: await count('tokens'), grants: await count('grants') },
      { ...before, grants: before.grants + 1 },
    );
  });
});
