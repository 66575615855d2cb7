import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CliResult, runCli } from '../support/cli';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk, connectMcp, rawMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { ingest, startTestServer, TestServer } from '../support/test-server';

/**
 * The CLI (docs/operators.md): `node dist/cli.js …` as an operator runs it (from source:
 * src/cli.ts), against a fresh database. What it creates must work against a server on the same
 * database, and it never prints a stored secret.
 */
const SECRET = /alc_[0-9A-Za-z]{20,}/;
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

describe('administrative CLI', () => {
  let db: TestDatabase;
  let server: TestServer | undefined;
  let mailboxId: string;
  let reader: { id: string; secret: string };
  let admin: { id: string; secret: string };

  const cli = (...args: string[]): Promise<CliResult> => runCli(db.url, ...args);

  async function cliOk(...args: string[]): Promise<string> {
    const result = await cli(...args);
    assert.equal(result.code, 0, `cli ${args.slice(0, 2).join(' ')} failed: ${result.stderr}`);
    return result.stdout;
  }

  const count = async (table: 'tokens' | 'mailboxes' | 'grants') =>
    Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`))[0].n);

  const schema = () =>
    db.query(
      `SELECT table_name, column_name, data_type FROM information_schema.columns
        WHERE table_schema = 'public' ORDER BY table_name, column_name`,
    );

  before(async () => {
    db = await createTestDatabase();
  });

  after(async () => {
    if (server) await server.close();
    else await db?.drop();
  });

  it('migrate creates the schema, and running it again is a no-op', async () => {
    assert.match(await cliOk('migrate'), /applied: /);
    const tables = new Set((await schema()).map((c) => c.table_name));
    for (const table of ['tokens', 'mailboxes', 'messages', 'approval_requests', 'events']) {
      assert.ok(tables.has(table), `table ${table} missing`);
    }
    const before = await schema();
    assert.match(await cliOk('migrate'), /up to date/);
    assert.deepEqual(JSON.parse(await cliOk('migrate', '--json')), { applied: [] });
    assert.deepEqual(await schema(), before);
  });

  it('mailboxes create, then mailboxes list shows them', async () => {
    const text = await cliOk('mailboxes', 'create', '--address', 'Support@Example.com', '--name', 'Support desk');
    const match = /^(mbx_[0-9A-Za-z]+)\s+support@example\.com\s+Support desk$/m.exec(text);
    assert.ok(match, `unexpected output: ${text}`);
    mailboxId = match[1];
    const created = JSON.parse(await cliOk('mailboxes', 'create', '--address', 'ops@example.com', '--json'));
    assert.match(created.mailbox_id, /^mbx_/);
    assert.deepEqual(created, { mailbox_id: created.mailbox_id, address: 'ops@example.com', name: null });

    const listed = await cliOk('mailboxes', 'list');
    assert.match(listed, new RegExp(`^${mailboxId}\\s+support@example\\.com\\s+Support desk$`, 'm'));
    assert.match(listed, new RegExp(`^${created.mailbox_id}\\s+ops@example\\.com$`, 'm'));
    assert.deepEqual(JSON.parse(await cliOk('mailboxes', 'list', '--json')), {
      mailboxes: [{ mailbox_id: mailboxId, address: 'support@example.com', name: 'Support desk' }, created],
    });

    const duplicate = await cli('mailboxes', 'create', '--address', 'ops@example.com');
    assert.equal(duplicate.code, 1);
    assert.match(duplicate.stderr, /conflict/);
    assert.equal(await count('mailboxes'), 2);
  });

  it('tokens create prints the id and the secret, which authenticates against a server', async () => {
    const text = await cli(
      'tokens',
      'create',
      '--name',
      'cli reader',
      '--scopes',
      'mail:read,mail:ingest',
      '--mailboxes',
      mailboxId,
    );
    assert.equal(text.code, 0, text.stderr);
    const id = /^token_id:\s+(tok_[0-9A-Za-z]+)$/m.exec(text.stdout)?.[1];
    const secret = /^secret:\s+(alc_[0-9A-Za-z]+)$/m.exec(text.stdout)?.[1];
    assert.ok(id && secret, 'token id or secret missing from the output');
    assert.match(secret, /^alc_[0-9A-Za-z]{43,}$/);
    assert.ok(!text.stderr.includes(secret), 'the secret was logged');
    reader = { id, secret };

    const json = await cli(
      'tokens',
      'create',
      '--name',
      'cli admin',
      '--scopes',
      'admin',
      '--mailboxes',
      '*',
      '--json',
    );
    assert.equal(json.code, 0, json.stderr);
    const created = JSON.parse(json.stdout);
    assert.match(created.token_id, /^tok_[0-9A-Za-z]+$/);
    assert.match(created.secret, /^alc_[0-9A-Za-z]{43,}$/);
    assert.deepEqual(
      { name: created.name, scopes: created.scopes, mailboxes: created.mailboxes, expires_at: created.expires_at },
      { name: 'cli admin', scopes: ['admin'], mailboxes: ['*'], expires_at: null },
    );
    assert.ok(!json.stderr.includes(created.secret), 'the secret was logged');
    admin = { id: created.token_id, secret: created.secret };

    for (const t of [reader, admin]) {
      const rows = await db.query<{ id: string }>('SELECT id FROM tokens WHERE secret_hash = $1', [sha256(t.secret)]);
      assert.deepEqual(rows, [{ id: t.id }]);
    }

    server = await startTestServer({ db });
    // The database already had tokens, so no bootstrap admin token was created (docs/operators.md).
    assert.equal((await server.admin.get('/v1/tokens')).status, 401);
    const client = await connectMcp(server.url, reader.secret);
    try {
      const { mailboxes } = await callOk(client, 'list_mailboxes');
      assert.deepEqual(
        mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id),
        [mailboxId],
      );
    } finally {
      await client.close();
    }
    await ingest(new RestClient(server.url, reader.secret), mailboxId, { subject: 'via a CLI token' });
    const tokens = await new RestClient(server.url, admin.secret).get('/v1/tokens');
    assert.equal(tokens.status, 200);
    assert.deepEqual(
      tokens.body.tokens.map((t: { token_id: string }) => t.token_id).sort(),
      [reader.id, admin.id].sort(),
    );
  });

  it('tokens list never prints a secret', async () => {
    for (const args of [
      ['tokens', 'list'],
      ['tokens', 'list', '--json'],
    ]) {
      const output = await cliOk(...args);
      assert.ok(output.includes(reader.id) && output.includes(admin.id), args.join(' '));
      assert.doesNotMatch(output, SECRET, args.join(' '));
      for (const t of [reader, admin]) assert.ok(!output.includes(sha256(t.secret)), args.join(' '));
    }
    const listed = JSON.parse(await cliOk('tokens', 'list', '--json'));
    const cliReader = listed.tokens.find((t: { token_id: string }) => t.token_id === reader.id);
    assert.deepEqual(cliReader.scopes, ['mail:read', 'mail:ingest']);
    assert.deepEqual(cliReader.mailboxes, [mailboxId]);
  });

  it('tokens revoke refuses the token at once', async () => {
    const rest = new RestClient(server!.url, reader.secret);
    const probe = () =>
      rest.post(`/v1/mailboxes/${mailboxId}/messages`, {
        from: 'a@b.example',
        to: ['c@d.example'],
        subject: 's',
        text: 't',
      });
    assert.equal((await probe()).status, 201);
    assert.match(await cliOk('tokens', 'revoke', reader.id), new RegExp(reader.id));
    const refused = await probe();
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="alcarta"');
    const mcp = await rawMcp(server!.url, reader.secret, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    assert.equal(mcp.status, 401);
    const listed = JSON.parse(await cliOk('tokens', 'list', '--json'));
    assert.equal(typeof listed.tokens.find((t: { token_id: string }) => t.token_id === reader.id).revoked_at, 'string');
    assert.match(await cliOk('tokens', 'list'), new RegExp(`^${reader.id}\\s.*REVOKED$`, 'm'));

    const unknown = await cli('tokens', 'revoke', 'tok_0000000000000000000000');
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /not_found/);
  });

  it('an unknown scope or mailbox fails with a clear message and creates nothing', async () => {
    const before = await count('tokens');
    const badScope = await cli(
      'tokens',
      'create',
      '--name',
      'bad',
      '--scopes',
      'mail:read,mail:write',
      '--mailboxes',
      '*',
    );
    assert.equal(badScope.code, 1);
    assert.match(badScope.stderr, /mail:write/);
    assert.doesNotMatch(badScope.stdout + badScope.stderr, SECRET);
    const badMailbox = await cli(
      'tokens',
      'create',
      '--name',
      'bad',
      '--scopes',
      'mail:read',
      '--mailboxes',
      'mbx_0000000000000000000000',
    );
    assert.equal(badMailbox.code, 1);
    assert.match(badMailbox.stderr, /mbx_0000000000000000000000/);
    assert.equal(await count('tokens'), before);
  });

  it('grants create, list and revoke, seen over the REST API', async () => {
    const text = await cliOk('grants', 'create', '--principal', 'group:ops', '--mailboxes', mailboxId);
    const grantId = new RegExp(`^(grt_[0-9A-Za-z]{22})\\s+group:ops\\s+mailboxes=${mailboxId}\\s+created=`, 'm').exec(
      text,
    )?.[1];
    assert.ok(grantId, `unexpected output: ${text}`);
    const all = JSON.parse(await cliOk('grants', 'create', '--principal', 'sub:alice', '--mailboxes', '*', '--json'));
    assert.deepEqual(all, {
      grant_id: all.grant_id,
      principal: 'sub:alice',
      mailboxes: ['*'],
      created_at: all.created_at,
    });
    const [row] = await db.query<{ created_by: string }>('SELECT created_by FROM grants WHERE id = $1', [grantId]);
    assert.equal(row.created_by, 'operator');

    const listed = JSON.parse(await cliOk('grants', 'list', '--json'));
    assert.deepEqual(
      listed.grants.map((g: { grant_id: string }) => g.grant_id),
      [grantId, all.grant_id],
    );
    assert.match(await cliOk('grants', 'list'), new RegExp(`^${all.grant_id}\\s+sub:alice\\s+mailboxes=\\*`, 'm'));
    const rest = await new RestClient(server!.url, admin.secret).get('/v1/grants');
    assert.deepEqual(rest.body, listed);

    assert.match(await cliOk('grants', 'revoke', grantId), new RegExp(grantId));
    assert.deepEqual(
      (await new RestClient(server!.url, admin.secret).get('/v1/grants')).body.grants.map(
        (g: { grant_id: string }) => g.grant_id,
      ),
      [all.grant_id],
    );
    const unknown = await cli('grants', 'revoke', grantId);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /not_found/);

    const before = await count('grants');
    const badPrincipal = await cli('grants', 'create', '--principal', 'user:bob', '--mailboxes', mailboxId);
    assert.equal(badPrincipal.code, 1);
    assert.match(badPrincipal.stderr, /invalid_principal/);
    const badMailbox = await cli(
      'grants',
      'create',
      '--principal',
      'sub:bob',
      '--mailboxes',
      'mbx_0000000000000000000000',
    );
    assert.equal(badMailbox.code, 1);
    assert.match(badMailbox.stderr, /mbx_0000000000000000000000/);
    assert.equal(await count('grants'), before);
  });

  it('unknown commands and missing flags exit 2 with the usage', async () => {
    const tokens = await count('tokens');
    const mailboxes = await count('mailboxes');
    const grants = await count('grants');
    const cases = [
      ['bogus'],
      ['tokens', 'frobnicate'],
      ['tokens', 'create', '--name', 'x'],
      ['tokens', 'create', '--scopes', 'admin', '--mailboxes', '*'],
      ['tokens', 'revoke'],
      ['grants', 'create', '--principal', 'group:ops'],
      ['grants', 'create', '--mailboxes', '*'],
      ['grants', 'revoke'],
      ['mailboxes', 'create', '--name', 'no address'],
      ['mailboxes', 'list', '--no-such-flag'],
    ];
    for (const args of cases) {
      const result = await cli(...args);
      assert.equal(result.code, 2, args.join(' '));
      assert.match(result.stderr, /^error: /m, args.join(' '));
      assert.match(result.stderr, /Usage: .*\n[\s\S]*tokens create --name N/, args.join(' '));
    }
    const bare = await cli();
    assert.equal(bare.code, 2);
    assert.match(bare.stdout + bare.stderr, /Usage: /);
    assert.equal(await count('tokens'), tokens);
    assert.equal(await count('mailboxes'), mailboxes);
    assert.equal(await count('grants'), grants);
  });
});
