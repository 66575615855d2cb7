import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { GrantService } from '#app/auth/grant.service.js';
import { RestClient } from '../support/rest';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

/**
 * docs/operators.md "Identity providers" grants: `POST/GET/DELETE /v1/grants` for `admin` callers,
 * administered like tokens (docs/operators.md "Limits and hardening"; a mailbox-bound admin reaches
 * only grants within its mailboxes), and the union of mailboxes an OAuth principal reaches through
 * its subject, client and groups.
 */
describe('grants of mailboxes to OAuth principals', () => {
  let server: TestServer;
  let boxA: string;
  let boxB: string;
  let boxC: string;
  let bound: RestClient;
  let grants: GrantService;

  const grantCount = async () =>
    Number((await server.db.query<{ n: string }>('SELECT count(*) AS n FROM grants'))[0].n);

  const grantIds = async (client: RestClient): Promise<string[]> => {
    const res = await client.get('/v1/grants');
    assert.equal(res.status, 200);
    return (res.body.grants as Array<{ grant_id: string }>).map((g) => g.grant_id);
  };

  async function grant(client: RestClient, principal: string, mailboxes: string[]): Promise<string> {
    const res = await client.post('/v1/grants', { principal, mailboxes });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.grant_id as string;
  }

  before(async () => {
    server = await startTestServer();
    [boxA, boxB, boxC] = [
      await createMailbox(server.admin),
      await createMailbox(server.admin),
      await createMailbox(server.admin),
    ];
    const tenantAdmin = await createToken(server.admin, { scopes: ['admin'], mailboxes: [boxA, boxB] });
    bound = server.admin.withToken(tenantAdmin.secret);
    grants = server.running.app.get(GrantService);
  });

  after(async () => {
    await server?.close();
  });

  it('POST creates a grant, GET lists it, DELETE removes it at once', async () => {
    const res = await server.admin.post('/v1/grants', { principal: 'group:ops', mailboxes: [boxA, boxB, boxA] });
    assert.equal(res.status, 201);
    assert.match(res.body.grant_id, /^grt_[0-9A-Za-z]{22}$/);
    assert.deepEqual(res.body, {
      grant_id: res.body.grant_id,
      principal: 'group:ops',
      mailboxes: [boxA, boxB],
      created_at: res.body.created_at,
    });
    assert.ok(Math.abs(Date.parse(res.body.created_at as string) - Date.now()) < 60_000);

    const listed = await server.admin.get('/v1/grants');
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.grants.find((g: { grant_id: string }) => g.grant_id === res.body.grant_id),
      res.body,
    );
    assert.deepEqual(
      await grants.mailboxesFor({ subject: 'u1', clientId: null, groups: ['ops'] }),
      [boxA, boxB].sort(),
    );

    const deleted = await server.admin.delete(`/v1/grants/${res.body.grant_id}`);
    assert.equal(deleted.status, 204);
    assert.ok(!(await grantIds(server.admin)).includes(res.body.grant_id as string));
    assert.deepEqual(await grants.mailboxesFor({ subject: 'u1', clientId: null, groups: ['ops'] }), []);

    const again = await server.admin.delete(`/v1/grants/${res.body.grant_id}`);
    assert.equal(again.status, 404);
    assert.equal(again.body.reason, 'grant_not_found');
  });

  it('records who created a grant', async () => {
    const id = await grant(bound, 'sub:recorded', [boxA]);
    const [row] = await server.db.query<{ created_by: string }>('SELECT created_by FROM grants WHERE id = $1', [id]);
    const [token] = await server.db.query<{ id: string }>(`SELECT id FROM tokens WHERE mailboxes = $1::text[]`, [
      [boxA, boxB],
    ]);
    assert.equal(row.created_by, token.id);
  });

  it('rejects bad input with a specific 400 and stores nothing', async () => {
    const before = await grantCount();
    const cases: Array<[unknown, string, string]> = [
      [{ principal: 'user:alice', mailboxes: [boxA] }, 'invalid_principal', 'principal'],
      [{ principal: 'group:', mailboxes: [boxA] }, 'invalid_principal', 'principal'],
      [{ principal: 'sub', mailboxes: [boxA] }, 'invalid_principal', 'principal'],
      [{ principal: 'sub:a\nb', mailboxes: [boxA] }, 'invalid_principal', 'principal'],
      [{ principal: `sub:${'x'.repeat(600)}`, mailboxes: [boxA] }, 'invalid_field', 'principal'],
      [{ principal: 42, mailboxes: [boxA] }, 'invalid_field', 'principal'],
      [{ mailboxes: [boxA] }, 'missing_field', 'principal'],
      [{ principal: 'sub:a' }, 'missing_field', 'mailboxes'],
      [{ principal: 'sub:a', mailboxes: [] }, 'invalid_field', 'mailboxes'],
      [{ principal: 'sub:a', mailboxes: 'mbx_x' }, 'invalid_field', 'mailboxes'],
      [{ principal: 'sub:a', mailboxes: ['*', boxA] }, 'invalid_mailboxes', 'mailboxes'],
      [{ principal: 'sub:a', mailboxes: ['mbx_0000000000000000000000'] }, 'unknown_mailbox', 'mailboxes'],
      [{ principal: 'sub:a', mailboxes: [boxA], extra: 1 }, 'unknown_field', 'extra'],
    ];
    for (const [body, reason, field] of cases) {
      const res = await server.admin.post('/v1/grants', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.error, 'invalid_request', JSON.stringify(body));
      assert.equal(res.body.reason, reason, JSON.stringify(body));
      assert.equal(res.body.field, field, JSON.stringify(body));
    }
    const malformed = await server.admin.raw('POST', '/v1/grants', '{"principal":', 'application/json');
    assert.equal(malformed.status, 400);
    for (const id of ['tok_0000000000000000000000', 'grt_..', 'x']) {
      const res = await server.admin.delete(`/v1/grants/${encodeURIComponent(id)}`);
      assert.equal(res.status, 404, id);
      assert.equal(res.body.reason, 'grant_not_found');
    }
    assert.equal(await grantCount(), before);
    // The table holds the same line for writers that bypass the service.
    for (const principal of ['group:', 'user:alice']) {
      await assert.rejects(
        server.db.query(`INSERT INTO grants (id, principal, mailboxes, created_by) VALUES ($1, $2, $3, 'test')`, [
          'grt_0000000000000000000000',
          principal,
          [boxA],
        ]),
        /grants_principal_check/,
      );
    }
  });

  it('needs the admin scope and a token', async () => {
    const reader = await createToken(server.admin, { scopes: ['mail:read', 'approvals:decide'], mailboxes: ['*'] });
    const client = server.admin.withToken(reader.secret);
    for (const res of [
      await client.get('/v1/grants'),
      await client.post('/v1/grants', { principal: 'sub:a', mailboxes: [boxA] }),
      await client.delete('/v1/grants/grt_0000000000000000000000'),
    ]) {
      assert.equal(res.status, 403);
      assert.equal(res.body.error, 'forbidden');
    }
    const anonymous = await fetch(`${server.url}/v1/grants`);
    assert.equal(anonymous.status, 401);
  });

  it('a mailbox-bound admin lists, creates and deletes only grants within its mailboxes', async () => {
    const inside = await grant(server.admin, 'group:inside', [boxA, boxB]);
    const partly = await grant(server.admin, 'group:partly', [boxA, boxC]);
    const outside = await grant(server.admin, 'group:outside', [boxC]);
    const everything = await grant(server.admin, 'group:everything', ['*']);

    const visible = await grantIds(bound);
    assert.ok(visible.includes(inside));
    for (const id of [partly, outside, everything]) assert.ok(!visible.includes(id), id);
    const all = await grantIds(server.admin);
    for (const id of [inside, partly, outside, everything]) assert.ok(all.includes(id), id);

    const before = await grantCount();
    for (const mailboxes of [['*'], [boxC], [boxA, boxC], ['mbx_0000000000000000000000']]) {
      const res = await bound.post('/v1/grants', { principal: 'sub:someone', mailboxes });
      assert.equal(res.status, 403, JSON.stringify(mailboxes));
      assert.equal(res.body.error, 'forbidden');
      assert.equal(res.body.reason, 'mailbox_out_of_reach');
    }
    for (const id of [partly, outside, everything]) {
      const res = await bound.delete(`/v1/grants/${id}`);
      assert.equal(res.status, 404, id);
      assert.equal(res.body.reason, 'grant_not_found');
    }
    assert.equal(await grantCount(), before);

    const own = await grant(bound, 'client:agent-1', [boxB]);
    assert.ok((await grantIds(bound)).includes(own));
    assert.equal((await bound.delete(`/v1/grants/${own}`)).status, 204);
    assert.equal((await bound.delete(`/v1/grants/${inside}`)).status, 204);
    for (const id of [partly, outside, everything])
      assert.equal((await server.admin.delete(`/v1/grants/${id}`)).status, 204);
  });

  it('mailboxesFor is the union over subject, client and groups; "*" wins; names do not leak across kinds', async () => {
    await grant(server.admin, 'sub:alice', [boxA]);
    await grant(server.admin, 'client:mail-agent', [boxB]);
    await grant(server.admin, 'group:support', [boxB, boxC]);
    await grant(server.admin, 'group:support', [boxA]);
    await grant(server.admin, 'group:admins', ['*']);

    const sorted = (ids: string[]) => [...ids].sort();
    assert.deepEqual(await grants.mailboxesFor({ subject: 'alice', clientId: null, groups: [] }), [boxA]);
    assert.deepEqual(
      await grants.mailboxesFor({ subject: 'alice', clientId: 'mail-agent', groups: [] }),
      sorted([boxA, boxB]),
    );
    assert.deepEqual(
      await grants.mailboxesFor({ subject: 'bob', clientId: null, groups: ['support', 'unknown'] }),
      sorted([boxA, boxB, boxC]),
    );
    assert.deepEqual(await grants.mailboxesFor({ subject: 'bob', clientId: null, groups: ['support', 'admins'] }), [
      '*',
    ]);
    assert.deepEqual(await grants.mailboxesFor({ subject: 'bob', clientId: null, groups: [] }), [], 'no grant');
    // A subject named like a group or client reaches only what its own kind was granted.
    assert.deepEqual(await grants.mailboxesFor({ subject: 'support', clientId: 'alice', groups: ['mail-agent'] }), []);
    assert.deepEqual(await grants.mailboxesFor({ subject: "alice' OR 1=1 --", clientId: null, groups: [] }), []);
    assert.deepEqual(
      await grants.mailboxesFor({ subject: 'a\u0000b', clientId: '\ud800', groups: ['x\u0000', 'support'] }),
      sorted([boxA, boxB, boxC]),
      'names PostgreSQL cannot store match nothing and break nothing',
    );
    const manyGroups = Array.from({ length: 70_000 }, (_, i) => `g${i}`);
    assert.deepEqual(
      await grants.mailboxesFor({ subject: 'bob', clientId: null, groups: [...manyGroups, 'support'] }),
      [...sorted([boxA, boxB, boxC])],
    );
  });
});
