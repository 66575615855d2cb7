import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callError, callOk, connectMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { createMailbox, createToken, ingest, randomSecret, startTestServer, TestServer } from '../support/test-server';

/**
 * docs/agents.md "Scopes" tenant isolation: a token sees only the mailboxes it is bound to and the
 * requests of those mailboxes. Everything else answers exactly like an id that does not exist
 * (`not_found`, never `forbidden`), on MCP and REST alike, and an attempt changes nothing on the
 * other side.
 */
const TENANT_SCOPES = ['mail:read', 'mail:send', 'approvals:read', 'approvals:decide', 'mail:ingest'];

interface Tenant {
  label: string;
  client: Client;
  rest: RestClient;
  mailbox: string;
  message: string;
  request: string;
}

/** A well-formed id that names nothing, the same length as real ids. */
const unknownId = (prefix: string) => `${prefix}_${randomSecret().slice(4, 26)}`;

/** Error bodies with the id they name blanked out, so two of them can be compared. */
const withoutId = (body: unknown, id: string) => JSON.parse(JSON.stringify(body).replaceAll(id, '<id>')) as unknown;

describe('tenant isolation between mailbox-bound tokens', () => {
  let server: TestServer;
  let a: Tenant;
  let b: Tenant;
  const clients: Client[] = [];

  async function tenant(label: string): Promise<Tenant> {
    const mailbox = await createMailbox(server.admin);
    const { secret } = await createToken(server.admin, { scopes: TENANT_SCOPES, mailboxes: [mailbox], name: label });
    const rest = server.admin.withToken(secret);
    const client = await connectMcp(server.url, secret);
    clients.push(client);
    const message = await ingest(rest, mailbox, { subject: `for ${label}` });
    const { request_id } = await callOk(client, 'request_approval', { mailbox_id: mailbox, title: `${label} asks` });
    await callOk(client, 'send_email', { mailbox_id: mailbox, to: ['x@example.org'], subject: label, text: 'hi' });
    return { label, client, rest, mailbox, message, request: request_id };
  }

  /** What the tenant itself sees of its data; nothing another tenant does may change it. */
  async function snapshot(t: Tenant) {
    return {
      messages: (await callOk(t.client, 'list_messages', { mailbox_id: t.mailbox, limit: 100 })).messages,
      requests: (await t.rest.get('/v1/requests')).body.requests,
    };
  }

  /** Runs `attempt` with the other tenant's real id and with an unknown id: both must be the same not_found. */
  async function assertNotFoundLikeUnknown(what: string, realId: string, attempt: (id: string) => Promise<unknown>) {
    const prefix = realId.split('_')[0];
    const fake = unknownId(prefix);
    const real = (await attempt(realId)) as { error: string };
    assert.equal(real.error, 'not_found', `${what}: ${JSON.stringify(real)}`);
    assert.deepEqual(withoutId(real, realId), withoutId(await attempt(fake), fake), `${what}: differs from unknown id`);
  }

  before(async () => {
    server = await startTestServer();
    a = await tenant('tenant A');
    b = await tenant('tenant B');
  });

  after(async () => {
    for (const client of clients) await client.close();
    await server?.close();
  });

  it('list_mailboxes shows only the own mailbox', async () => {
    for (const t of [a, b]) {
      const { mailboxes } = await callOk(t.client, 'list_mailboxes');
      assert.deepEqual(
        mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id),
        [t.mailbox],
        t.label,
      );
    }
  });

  for (const [selfName, otherName] of [
    ['A', 'B'],
    ['B', 'A'],
  ]) {
    const pair = () => (selfName === 'A' ? [a, b] : [b, a]);

    it(`MCP: ${selfName} gets not_found for everything of ${otherName}, which stays unchanged`, async () => {
      const [self, other] = pair();
      const before = await snapshot(other);
      const tool = (name: string, args: Record<string, unknown>) => callError(self.client, name, args);
      await assertNotFoundLikeUnknown('list_messages', other.mailbox, (id) =>
        tool('list_messages', { mailbox_id: id }),
      );
      await assertNotFoundLikeUnknown('get_message', other.message, (id) => tool('get_message', { message_id: id }));
      const email = { to: ['y@example.org'], subject: 'from the wrong tenant', text: 'no' };
      await assertNotFoundLikeUnknown('send_email', other.mailbox, (id) =>
        tool('send_email', { mailbox_id: id, ...email }),
      );
      await assertNotFoundLikeUnknown('send_email replying to their message', other.message, (id) =>
        tool('send_email', { mailbox_id: self.mailbox, in_reply_to_message_id: id, ...email }),
      );
      await assertNotFoundLikeUnknown('request_approval', other.mailbox, (id) =>
        tool('request_approval', { mailbox_id: id, title: 'from the wrong tenant' }),
      );
      await assertNotFoundLikeUnknown('get_request', other.request, (id) => tool('get_request', { request_id: id }));
      await assertNotFoundLikeUnknown('cancel_request', other.request, (id) =>
        tool('cancel_request', { request_id: id }),
      );
      assert.deepEqual(await snapshot(other), before);
      assert.equal((await callOk(other.client, 'get_request', { request_id: other.request })).state, 'pending');
    });

    it(`REST: ${selfName} gets 404 not_found for everything of ${otherName}, which stays unchanged`, async () => {
      const [self, other] = pair();
      const before = await snapshot(other);
      const rest = async (what: string, send: () => Promise<{ status: number; body: unknown }>) => {
        const res = await send();
        assert.equal(res.status, 404, `${what}: ${JSON.stringify(res.body)}`);
        return res.body;
      };
      const message = { from: 'z@example.org', to: ['q@example.com'], subject: 'wrong tenant', text: 'no' };
      await assertNotFoundLikeUnknown('ingest', other.mailbox, (id) =>
        rest('ingest', () => self.rest.post(`/v1/mailboxes/${id}/messages`, message)),
      );
      for (const decision of ['approve', 'reject']) {
        await assertNotFoundLikeUnknown(decision, other.request, (id) =>
          rest(decision, () => self.rest.post(`/v1/requests/${id}/${decision}`, { reason: 'not mine' })),
        );
      }
      await assertNotFoundLikeUnknown('list requests of their mailbox', other.mailbox, (id) =>
        rest('list', () => self.rest.get(`/v1/requests?mailbox_id=${id}`)),
      );

      const own = await self.rest.get('/v1/requests');
      assert.equal(own.status, 200);
      const ids = own.body.requests.map((r: { request_id: string }) => r.request_id);
      assert.ok(ids.includes(self.request) && !ids.includes(other.request));
      assert.ok(own.body.requests.every((r: { mailbox_id: string }) => r.mailbox_id === self.mailbox));
      const ownFiltered = await self.rest.get(`/v1/requests?mailbox_id=${self.mailbox}`);
      assert.deepEqual(ownFiltered.body, own.body);

      assert.deepEqual(await snapshot(other), before);
    });
  }

  it('a token bound to "*" sees both tenants', async () => {
    const { secret } = await createToken(server.admin, { scopes: TENANT_SCOPES, mailboxes: ['*'] });
    const client = await connectMcp(server.url, secret);
    try {
      const { mailboxes } = await callOk(client, 'list_mailboxes');
      const visible = mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id);
      for (const t of [a, b]) {
        assert.ok(visible.includes(t.mailbox), t.label);
        assert.equal((await callOk(client, 'get_message', { message_id: t.message })).mailbox_id, t.mailbox);
        assert.equal((await callOk(client, 'get_request', { request_id: t.request })).mailbox_id, t.mailbox);
        const page = await callOk(client, 'list_messages', { mailbox_id: t.mailbox });
        assert.ok(page.messages.some((m: { message_id: string }) => m.message_id === t.message));
      }
      const all = await server.admin.withToken(secret).get('/v1/requests');
      const ids = all.body.requests.map((r: { request_id: string }) => r.request_id);
      assert.ok(ids.includes(a.request) && ids.includes(b.request));
    } finally {
      await client.close();
    }
  });
});
