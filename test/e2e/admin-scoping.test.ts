import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../support/cli';
import { callOk, connectMcp, rawMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

/**
 * "A mailbox-bound admin token administers only its mailboxes" (docs/operators.md, "Limits and
 * hardening"), over the REST API: an `admin` bound to mailboxes A and B lists and revokes only
 * tokens bound within A and B (others are left out, and not found), creates tokens only for A and B
 * (403 `mailbox_out_of_reach` for `*`, for C, and for ids that exist nowhere), lists only A and B,
 * and cannot create mailboxes. An admin bound to `*`, and the CLI (the operator), administer
 * everything.
 */
describe('a mailbox-bound admin token', () => {
  let server: TestServer;
  let boxA: string;
  let boxB: string;
  let boxC: string;
  let bound: { id: string; secret: string };
  let admin: RestClient;
  /** Tokens by what they are bound to. */
  const tokens: Record<'a' | 'ab' | 'ac' | 'c' | 'all', { id: string; secret: string }> = {} as never;

  const tokenIds = async (client: RestClient): Promise<string[]> => {
    const res = await client.get('/v1/tokens');
    assert.equal(res.status, 200);
    return (res.body.tokens as Array<{ token_id: string }>).map((t) => t.token_id);
  };

  const tokenCount = async () =>
    Number((await server.db.query<{ n: string }>('SELECT count(*) AS n FROM tokens'))[0].n);

  /** Whether a token still authenticates (on /mcp, which every token may use). */
  const valid = async (secret: string) =>
    (await rawMcp(server.url, secret, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).status === 200;

  before(async () => {
    server = await startTestServer();
    [boxA, boxB, boxC] = [
      await createMailbox(server.admin),
      await createMailbox(server.admin),
      await createMailbox(server.admin),
    ];
    bound = await createToken(server.admin, { scopes: ['admin'], mailboxes: [boxA, boxB], name: 'tenant admin' });
    admin = server.admin.withToken(bound.secret);
    tokens.a = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [boxA] });
    tokens.ab = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [boxA, boxB] });
    tokens.ac = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [boxA, boxC] });
    tokens.c = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [boxC] });
    tokens.all = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] });
  });

  after(async () => {
    await server?.close();
  });

  it('GET /v1/tokens lists only tokens whose mailboxes are all within its own', async () => {
    assert.deepEqual(
      (await tokenIds(admin)).sort(),
      [bound.id, tokens.a.id, tokens.ab.id].sort(),
      'not A+C, C, "*", nor the bootstrap admin',
    );
    const everything = await tokenIds(server.admin);
    for (const t of [bound, ...Object.values(tokens)]) assert.ok(everything.includes(t.id), 'the "*" admin sees all');
  });

  it('DELETE /v1/tokens of a token out of reach is 404 not_found and revokes nothing', async () => {
    const [bootstrap] = (
      await server.db.query<{ id: string }>(`SELECT id FROM tokens WHERE name = 'bootstrap admin'`)
    ).map((r) => r.id);
    for (const id of [tokens.ac.id, tokens.c.id, tokens.all.id, bootstrap, 'tok_0000000000000000000000']) {
      const res = await admin.delete(`/v1/tokens/${id}`);
      assert.equal(res.status, 404, id);
      assert.equal(res.body.error, 'not_found');
      assert.equal(res.body.reason, 'token_not_found');
    }
    for (const t of [tokens.ac, tokens.c, tokens.all]) assert.equal(await valid(t.secret), true, 'still valid');
    assert.equal(await valid(server.adminToken), true);
    const revoked = await server.db.query(`SELECT id FROM tokens WHERE revoked_at IS NOT NULL`);
    assert.deepEqual(revoked, []);
  });

  it('revokes a token within its mailboxes', async () => {
    const victim = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [boxB] });
    assert.equal(await valid(victim.secret), true);
    assert.equal((await admin.delete(`/v1/tokens/${victim.id}`)).status, 204);
    assert.equal(await valid(victim.secret), false);
  });

  it('POST /v1/tokens for "*", another mailbox or an unknown id is 403 mailbox_out_of_reach and creates nothing', async () => {
    const before = await tokenCount();
    for (const mailboxes of [['*'], [boxC], [boxA, boxC], ['mbx_doesnotexist']]) {
      const res = await admin.post('/v1/tokens', { name: 'escalation', scopes: ['admin'], mailboxes });
      assert.equal(res.status, 403, JSON.stringify(mailboxes));
      assert.equal(res.body.error, 'forbidden');
      assert.equal(res.body.reason, 'mailbox_out_of_reach');
      assert.equal(typeof res.body.message, 'string');
    }
    assert.equal(await tokenCount(), before);
  });

  it('POST /v1/tokens within its mailboxes works, and the new token sees only those', async () => {
    const res = await admin.post('/v1/tokens', {
      name: 'tenant reader',
      scopes: ['mail:read'],
      mailboxes: [boxA, boxB],
    });
    assert.equal(res.status, 201);
    assert.deepEqual(res.body.mailboxes, [boxA, boxB]);
    const reader = await connectMcp(server.url, res.body.secret as string);
    try {
      const { mailboxes } = await callOk(reader, 'list_mailboxes');
      assert.deepEqual(mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id).sort(), [boxA, boxB].sort());
    } finally {
      await reader.close();
    }
    assert.ok((await tokenIds(admin)).includes(res.body.token_id as string));
  });

  it('GET /v1/mailboxes lists only its mailboxes; POST /v1/mailboxes is 403 and creates nothing', async () => {
    const listed = await admin.get('/v1/mailboxes');
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id).sort(),
      [boxA, boxB].sort(),
    );

    const address = `not-created-${Date.now()}@example.com`;
    const res = await admin.post('/v1/mailboxes', { address });
    assert.equal(res.status, 403);
    assert.equal(res.body.error, 'forbidden');
    assert.equal(res.body.reason, 'mailbox_out_of_reach');
    assert.deepEqual(await server.db.query('SELECT id FROM mailboxes WHERE address = $1', [address]), []);
    assert.equal((await server.admin.post('/v1/mailboxes', { address })).status, 201, 'the "*" admin can');
  });

  it('the CLI acts as the operator: it lists, creates and revokes every token and creates mailboxes', async () => {
    const cli = async (...args: string[]) => {
      const result = await runCli(server.db.url, ...args, '--json');
      assert.equal(result.code, 0, `cli ${args.join(' ')}: ${result.stderr}`);
      return JSON.parse(result.stdout);
    };
    const listed = (await cli('tokens', 'list')).tokens.map((t: { token_id: string }) => t.token_id);
    for (const t of Object.values(tokens)) assert.ok(listed.includes(t.id));
    const created = await cli('tokens', 'create', '--name', 'ops', '--scopes', 'mail:read', '--mailboxes', '*');
    assert.deepEqual(created.mailboxes, ['*']);
    await cli('tokens', 'revoke', tokens.c.id);
    assert.equal(await valid(tokens.c.secret), false);
    const mailbox = await cli('mailboxes', 'create', '--address', `cli-${Date.now()}@example.com`);
    assert.match(mailbox.mailbox_id, /^mbx_/);
  });
});
