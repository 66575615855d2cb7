import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { callOk, connectMcp, rawMcp } from '../support/mcp';
import { createMailbox, createToken, ingest, randomSecret, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/**
 * Scopes (docs/agents.md "Scopes"), the 401 on /mcp (docs/agents.md "Tools"), token administration
 * (docs/rest-api.md) and the bootstrap token (docs/operators.md): who gets in, what each scope
 * allows on REST and MCP, and how tokens are created, stored and revoked.
 */
const ALL_SCOPES = [
  'mail:read',
  'mail:send',
  'approvals:read',
  'approvals:decide',
  'mail:ingest',
  'webhooks:manage',
  'admin',
];
const ALL_TOOLS = [
  'list_mailboxes',
  'list_messages',
  'get_message',
  'send_email',
  'request_approval',
  'get_request',
  'cancel_request',
];
const LIST_TOOLS = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const FORBIDDEN_MESSAGE = { from: 'a@example.org', to: ['b@example.com'], subject: 'forbidden', text: 'no' };
const mailboxIds = (r: { mailboxes: Array<{ mailbox_id: string }> }) => r.mailboxes.map((m) => m.mailbox_id);
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

describe('authentication, scopes and token administration', () => {
  let server: TestServer;
  let mailboxId: string;

  /** GET /v1/requests and POST /mcp tools/list with a verbatim Authorization header (or none). */
  async function probe(authorization: string | undefined) {
    const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
    const res = await fetch(`${server.url}/v1/requests`, { headers });
    const body: any = await res.json().catch(() => undefined);
    const mcp = await rawMcp(server.url, undefined, LIST_TOOLS, headers);
    return [
      { surface: 'REST', status: res.status, headers: res.headers, body },
      { surface: 'MCP', status: mcp.status, headers: mcp.headers, body: mcp.json },
    ];
  }

  async function assertRefused(what: string, authorization: string | undefined) {
    for (const r of await probe(authorization)) {
      const label = `${what} on ${r.surface}`;
      assert.equal(r.status, 401, label);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="alcarta"', label);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/, label);
      assert.equal(r.body?.error, 'unauthorized', label);
      const secret = /alc_[0-9A-Za-z]{20,}/.exec(authorization ?? '')?.[0];
      if (secret) assert.ok(!JSON.stringify(r.body).includes(secret), `${label} echoes the secret`);
    }
  }

  async function assertAccepted(what: string, secret: string) {
    for (const r of await probe(`Bearer ${secret}`)) assert.equal(r.status, 200, `${what} on ${r.surface}`);
  }

  async function toolNames(secret: string): Promise<string[]> {
    const client = await connectMcp(server.url, secret);
    try {
      return (await client.listTools()).tools.map((t) => t.name);
    } finally {
      await client.close();
    }
  }

  const tokenCount = async () =>
    Number((await server.db.query<{ n: string }>('SELECT count(*) AS n FROM tokens'))[0].n);

  before(async () => {
    server = await startTestServer();
    mailboxId = await createMailbox(server.admin);
  });

  after(async () => {
    await server?.close();
  });

  it('refuses a missing, malformed or unknown token with 401 on REST and /mcp', async () => {
    await assertRefused('no Authorization header', undefined);
    for (const header of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer alc_short', 'Token ' + randomSecret()]) {
      await assertRefused(`malformed header ${JSON.stringify(header.slice(0, 12))}`, header);
    }
    await assertRefused('the bare secret without "Bearer"', randomSecret());
    await assertRefused('an unknown alc_ secret', `Bearer ${randomSecret()}`);
  });

  it('revocation takes effect on the very next request, on REST and /mcp', async () => {
    const { id, secret } = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: ['*'] });
    const client = await connectMcp(server.url, secret);
    try {
      await callOk(client, 'list_mailboxes');
      await assertAccepted('before revocation', secret);
      const res = await server.admin.delete(`/v1/tokens/${id}`);
      assert.equal(res.status, 204);
      await assertRefused('a revoked token', `Bearer ${secret}`);
      await assert.rejects(client.callTool({ name: 'list_mailboxes', arguments: {} }));
    } finally {
      await client.close();
    }
    const listed = (await server.admin.get('/v1/tokens')).body.tokens.find(
      (t: { token_id: string }) => t.token_id === id,
    );
    assert.equal(typeof listed.revoked_at, 'string');
    const unknown = await server.admin.delete('/v1/tokens/tok_0000000000000000000000');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error, 'not_found');
  });

  it('an expired token is refused once its expires_at has passed', async () => {
    const expiresAt = new Date(Date.now() + 5_000).toISOString();
    const { secret } = await createToken(server.admin, {
      scopes: ['approvals:decide'],
      mailboxes: ['*'],
      expires_at: expiresAt,
    });
    await waitFor(
      'the expired token to be refused',
      async () => (await server.admin.withToken(secret).get('/v1/requests')).status === 401,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    assert.ok(Date.now() >= Date.parse(expiresAt), 'refused before it expired');
    await assertRefused('an expired token', `Bearer ${secret}`);
  });

  it('a missing scope on REST is 403 forbidden and changes nothing', async () => {
    const reader = server.admin.withToken(
      (await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: ['*'] })).secret,
    );
    const agent = await connectMcp(server.url, reader.token!);
    const pending = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'pay invoice' });
    await agent.close();
    const allButAdmin = server.admin.withToken(
      (await createToken(server.admin, { scopes: ALL_SCOPES.filter((s) => s !== 'admin'), mailboxes: ['*'] })).secret,
    );
    const tokensBefore = await tokenCount();
    const attempts: Array<[string, Promise<{ status: number; body: any }>]> = [
      ['ingest without mail:ingest', reader.post(`/v1/mailboxes/${mailboxId}/messages`, FORBIDDEN_MESSAGE)],
      ['approve without approvals:decide', reader.post(`/v1/requests/${pending.request_id}/approve`, {})],
      ['reject without approvals:decide', reader.post(`/v1/requests/${pending.request_id}/reject`, {})],
      ['list requests without approvals:decide', reader.get('/v1/requests')],
      ['list tokens without admin', allButAdmin.get('/v1/tokens')],
      [
        'create token without admin',
        allButAdmin.post('/v1/tokens', { name: 'x', scopes: ['admin'], mailboxes: ['*'] }),
      ],
      ['create mailbox without admin', allButAdmin.post('/v1/mailboxes', { address: 'sneaky@example.com' })],
    ];
    for (const [what, attempt] of attempts) {
      const res = await attempt;
      assert.equal(res.status, 403, what);
      assert.equal(res.body.error, 'forbidden', what);
    }
    assert.equal(await tokenCount(), tokensBefore);
    const after = await server.admin.get(`/v1/requests?mailbox_id=${mailboxId}`);
    const request = after.body.requests.find((r: { request_id: string }) => r.request_id === pending.request_id);
    assert.equal(request.state, 'pending');
    assert.deepEqual(await server.db.query(`SELECT 1 FROM messages WHERE subject = 'forbidden'`), []);
    assert.deepEqual(await server.db.query(`SELECT 1 FROM mailboxes WHERE address LIKE 'sneaky@%'`), []);
  });

  it('admin implies every scope', async () => {
    const admin = server.admin.withToken(
      (await createToken(server.admin, { scopes: ['admin'], mailboxes: ['*'] })).secret,
    );
    await ingest(admin, mailboxId, { subject: 'admin ingest' });
    const agent = await connectMcp(server.url, admin.token!);
    try {
      // Exactly the tools of a token with every scope.
      assert.deepEqual(await toolNames(admin.token!), await toolNames(server.adminToken));
      const { request_id } = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'admin asks' });
      assert.equal((await admin.get('/v1/requests')).status, 200);
      // Every scope, but never the approval of its own request.
      const own = await admin.post(`/v1/requests/${request_id}/approve`, {});
      assert.equal(own.status, 403, JSON.stringify(own.body));
      assert.equal(own.body.reason, 'self_approval');
      const asker = await connectMcp(server.url, server.adminToken);
      const { request_id: asked } = await callOk(asker, 'request_approval', {
        mailbox_id: mailboxId,
        title: 'another asks',
      });
      await asker.close();
      const approved = await admin.post(`/v1/requests/${asked}/approve`, {});
      assert.equal(approved.status, 200);
      assert.equal(approved.body.state, 'approved');
      assert.equal((await admin.get('/v1/tokens')).status, 200);
    } finally {
      await agent.close();
    }
  });

  it('POST /v1/tokens returns the secret once; only its SHA-256 is stored', async () => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const spec = { name: 'shape check', scopes: ['mail:read', 'mail:send'], mailboxes: [mailboxId] };
    const res = await server.admin.post('/v1/tokens', { ...spec, expires_at: expiresAt });
    assert.equal(res.status, 201);
    const created = res.body;
    assert.deepEqual(Object.keys(created).sort(), ['expires_at', 'mailboxes', 'name', 'scopes', 'secret', 'token_id']);
    assert.match(created.token_id, /^tok_[0-9A-Za-z]+$/);
    assert.match(created.secret, /^alc_[0-9A-Za-z]{43,}$/);
    assert.deepEqual({ name: created.name, scopes: created.scopes, mailboxes: created.mailboxes }, spec);
    assert.equal(new Date(created.expires_at).toISOString(), expiresAt);
    const noExpiry = await server.admin.post('/v1/tokens', { ...spec, name: 'no expiry' });
    assert.equal(noExpiry.body.expires_at, null);

    const client = await connectMcp(server.url, created.secret);
    const visible = await callOk(client, 'list_mailboxes').finally(() => client.close());
    assert.deepEqual(mailboxIds(visible), [mailboxId]);

    const listed = await server.admin.get('/v1/tokens');
    assert.equal(listed.status, 200);
    assert.ok(listed.body.tokens.some((t: { token_id: string }) => t.token_id === created.token_id));
    const leaks: string[] = [];
    JSON.stringify(listed.body, (key, value: unknown) => {
      if (typeof value === 'string' && value.startsWith('alc_')) leaks.push(key);
      return value;
    });
    assert.deepEqual(leaks, [], 'GET /v1/tokens shows a secret');
    assert.ok(!JSON.stringify(listed.body).includes(sha256(created.secret)), 'GET /v1/tokens shows a hash');

    const rows = await server.db.query<{ hash: string }>('SELECT secret_hash AS hash FROM tokens WHERE id = $1', [
      created.token_id,
    ]);
    assert.deepEqual(rows, [{ hash: sha256(created.secret) }]);
    // No column of any token row holds the secret (or its random part).
    const everything = await server.db.query<{ row: string }>('SELECT t::text AS row FROM tokens t');
    assert.ok(
      everything.every((r) => !r.row.includes(created.secret.slice(4))),
      'the secret is stored',
    );
  });

  it('rejects invalid token specs with a specific reason and creates nothing', async () => {
    const valid = { name: 'v', scopes: ['mail:read'], mailboxes: ['*'] };
    const cases: Array<[string, Record<string, unknown>, string, string]> = [
      ['unknown scope', { ...valid, scopes: ['mail:read', 'mail:write'] }, 'invalid_field', 'scopes'],
      ['empty scopes', { ...valid, scopes: [] }, 'invalid_field', 'scopes'],
      ['unknown mailbox', { ...valid, mailboxes: ['mbx_0000000000000000000000'] }, 'unknown_mailbox', 'mailboxes'],
      ['"*" mixed with ids', { ...valid, mailboxes: ['*', mailboxId] }, 'invalid_mailboxes', 'mailboxes'],
      ['expires_at in the past', { ...valid, expires_at: '2020-01-01T00:00:00Z' }, 'expires_at_in_past', 'expires_at'],
      ['expires_at not a date', { ...valid, expires_at: 'next tuesday' }, 'invalid_field', 'expires_at'],
      ['unknown field', { ...valid, secret: randomSecret() }, 'unknown_field', 'secret'],
      ['missing name', { scopes: valid.scopes, mailboxes: valid.mailboxes }, 'missing_field', 'name'],
    ];
    const before = (await server.admin.get('/v1/tokens')).body.tokens.length;
    for (const [what, body, reason, field] of cases) {
      const res = await server.admin.post('/v1/tokens', body);
      assert.equal(res.status, 400, what);
      assert.equal(res.body.error, 'invalid_request', what);
      assert.equal(res.body.reason, reason, what);
      assert.equal(res.body.field, field, what);
      assert.equal(typeof res.body.message, 'string', what);
    }
    assert.equal((await server.admin.get('/v1/tokens')).body.tokens.length, before);
  });

  it('tools/list shows only the tools the scopes allow', async () => {
    const cases: Array<[string[], string[]]> = [
      [['mail:read'], ['list_mailboxes', 'list_messages', 'get_message']],
      [['mail:send'], ['list_mailboxes', 'send_email']],
      [['approvals:read'], ['list_mailboxes', 'request_approval', 'get_request', 'cancel_request']],
      [['mail:ingest'], ['list_mailboxes']],
      [['approvals:decide'], ['list_mailboxes']],
    ];
    for (const [scopes, visible] of cases) {
      const { secret } = await createToken(server.admin, { scopes, mailboxes: [mailboxId] });
      const names = await toolNames(secret);
      for (const tool of ALL_TOOLS) {
        assert.equal(names.includes(tool), visible.includes(tool), `${tool} with ${scopes.join(',')}`);
      }
    }
  });

  it('calling a tool the scopes do not allow fails exactly like an unknown tool, with no effect', async () => {
    const { id, secret } = await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const forbiddenCalls: Array<[string, Record<string, unknown>]> = [
      ['request_approval', { mailbox_id: mailboxId, title: 'not allowed' }],
      ['send_email', { mailbox_id: mailboxId, to: ['x@example.org'], subject: 's', text: 't' }],
      ['get_request', { request_id: 'chk_0000000000000000000000' }],
    ];
    const sdkError = async (client: Awaited<ReturnType<typeof connectMcp>>, name: string, args: object) => {
      const err = await client.callTool({ name, arguments: args as Record<string, unknown> }).then(
        () => assert.fail(`${name} succeeded`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof McpError, `${name}: ${String(err)}`);
      return { code: err.code, message: err.message.replace(name, '<tool>'), data: err.data };
    };
    const rawError = async (name: string, args: object) => {
      const body = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: args } };
      const res = await rawMcp(server.url, secret, body);
      assert.equal(res.status, 200);
      return JSON.parse(JSON.stringify(res.json).replaceAll(name, '<tool>'));
    };

    const client = await connectMcp(server.url, secret);
    try {
      const unknownSdk = await sdkError(client, 'no_such_tool', {});
      assert.equal(unknownSdk.code, -32602);
      const unknownRaw = await rawError('no_such_tool', {});
      assert.equal(unknownRaw.error.code, -32602);
      assert.equal(unknownRaw.result, undefined);
      for (const [name, args] of forbiddenCalls) {
        assert.deepEqual(await sdkError(client, name, args), unknownSdk, name);
        assert.deepEqual(await rawError(name, args), unknownRaw, name);
      }
    } finally {
      await client.close();
    }
    const created = await server.db.query('SELECT 1 FROM approval_requests WHERE created_by = $1', [id]);
    assert.equal(created.length, 0, 'a forbidden tool call created a request');
  });

  it('the bootstrap admin token from ALCARTA_BOOTSTRAP_TOKEN has every scope on every mailbox', async () => {
    const [row] = await server.db.query<{ scopes: string[]; mailboxes: string[]; expires_at: null; revoked_at: null }>(
      'SELECT scopes, mailboxes, expires_at, revoked_at FROM tokens WHERE secret_hash = $1',
      [sha256(server.adminToken)],
    );
    assert.deepEqual([...row.scopes].sort(), [...ALL_SCOPES].sort());
    assert.deepEqual(row.mailboxes, ['*']);
    assert.equal(row.expires_at, null);
    assert.equal(row.revoked_at, null);

    const second = await createMailbox(server.admin);
    await ingest(server.admin, second, { subject: 'into a mailbox created after the token' });
    assert.equal((await server.admin.get(`/v1/requests?mailbox_id=${second}`)).status, 200);
    assert.equal((await server.admin.get('/v1/tokens')).status, 200);
    const client = await connectMcp(server.url, server.adminToken);
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name);
      for (const tool of ALL_TOOLS) assert.ok(tools.includes(tool), tool);
      const ids = mailboxIds(await callOk(client, 'list_mailboxes'));
      assert.ok(ids.includes(mailboxId) && ids.includes(second));
      const page = await callOk(client, 'list_messages', { mailbox_id: second });
      assert.equal(page.messages.length, 1);
    } finally {
      await client.close();
    }
  });
});
