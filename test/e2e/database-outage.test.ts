import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { RunningServer, startServer } from '#app/server.js';
import { postSignIn } from '../support/console';
import { connectMcp, rawMcp } from '../support/mcp';
import { PrivateCluster } from '../support/private-cluster';
import { activeWaits } from '../support/metrics';
import { RestClient } from '../support/rest';
import { createMailbox, createToken, ingest, randomSecret } from '../support/test-server';
import { serverLogger } from '../support/test-logs';
import { waitFor } from '../support/wait-for';

/** docs/operators.md "Limits and hardening": no call hangs longer than this while PostgreSQL is unreachable. */
const MAX_CALL_MS = 5000;

/** Runs `call` and asserts that it settled within MAX_CALL_MS. */
async function quickly<T>(what: string, call: () => Promise<T>): Promise<T> {
  const started = Date.now();
  const result = await call();
  const took = Date.now() - started;
  assert.ok(took < MAX_CALL_MS, `${what} took ${took} ms`);
  return result;
}

/**
 * "Database outage" (docs/operators.md, "Limits and hardening"), with a real PostgreSQL that the
 * test stops and starts again on the same port: while it is down, REST answers 503 `unavailable`
 * with Retry-After, /mcp answers HTTP 503 with a JSON-RPC error, nothing hangs, /metrics answers
 * with alcarta_database_up 0 and readiness fails; once it is back, the same process serves requests
 * and waits again.
 */
describe('database outage', () => {
  let cluster: PrivateCluster;
  let server: RunningServer;
  let admin: RestClient;
  let mailboxId: string;
  let agentSecret: string;
  const adminSecret = randomSecret();

  before(async () => {
    cluster = await PrivateCluster.create();
    server = await startServer({
      overrides: {
        DATABASE_URL: cluster.url,
        PORT: '0',
        ALCARTA_HOST: '127.0.0.1',
        ALCARTA_BOOTSTRAP_TOKEN: adminSecret,
        ALCARTA_LOG_LEVEL: 'silent',
        ALCARTA_DB_POOL_SIZE: '5',
        ALCARTA_KEEPALIVE_SECONDS: '1',
        ALCARTA_SMTP_PORT: 'off',
      },
      logger: serverLogger('silent'),
    });
    admin = new RestClient(server.url, adminSecret);
    mailboxId = await createMailbox(admin);
    agentSecret = (await createToken(admin, { scopes: ['mail:read'], mailboxes: [mailboxId] })).secret;
  });

  after(async () => {
    await server?.close();
    await cluster?.remove();
  });

  it('answers 503 while PostgreSQL is down, keeps /metrics up, and recovers when it is back', async () => {
    const metricsUp = async () => {
      const res = await fetch(`${server.url}/metrics`);
      assert.equal(res.status, 200);
      return /^alcarta_database_up (\d)$/m.exec(await res.text())?.[1];
    };
    assert.equal(await metricsUp(), '1');
    // A wait parked across the outage ends (answered or as a JSON-RPC error), it does not hang.
    const parked = rawMcp(server.url, agentSecret, {
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: {
        name: 'email_await',
        arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: 3 },
      },
    });
    await waitFor('the wait to park', async () => (await activeWaits(server.url, 'message')) === 1);

    const signedIn = await postSignIn(server.url, adminSecret);
    assert.equal(signedIn.status, 303, 'signed in to the console');
    const session = signedIn.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');

    await cluster.stop();

    const rest = await quickly('REST during the outage', () => admin.get('/v1/mailboxes'));
    assert.equal(rest.status, 503, JSON.stringify(rest.body));
    assert.equal(rest.body.error, 'unavailable');
    assert.ok(Number(rest.headers.get('retry-after')) > 0, 'Retry-After');

    const ingestDown = await quickly('ingest during the outage', () =>
      admin.post(`/v1/mailboxes/${mailboxId}/messages`, { from: 'a@example.org', to: ['b@example.com'], text: 'x' }),
    );
    assert.equal(ingestDown.status, 503);

    for (const body of [
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_mailboxes', arguments: {} } },
      {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: {
          name: 'email_await',
          arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: 30 },
        },
      },
    ]) {
      const mcp = await quickly(`/mcp ${body.method} during the outage`, () => rawMcp(server.url, agentSecret, body));
      assert.equal(mcp.status, 503, mcp.text);
      assert.equal(mcp.json?.jsonrpc, '2.0', mcp.text);
      assert.equal(mcp.json?.id, body.id, `the request's id: ${mcp.text}`);
      assert.equal(typeof mcp.json?.error?.code, 'number', mcp.text);
      assert.ok(Number(mcp.headers.get('retry-after')) > 0, 'Retry-After on /mcp');
    }

    // The console answers people: a page that says to retry, with Retry-After, never a 500.
    for (const [what, answer] of [
      ['a console page', () => fetch(`${server.url}/console`, { headers: { cookie: session }, redirect: 'manual' })],
      ['a console sign-in', () => postSignIn(server.url, adminSecret)],
    ] as const) {
      const res = await quickly(`${what} during the outage`, answer);
      assert.equal(res.status, 503, `${what}: ${res.status}`);
      assert.ok(Number(res.headers.get('retry-after')) > 0, `${what}: Retry-After`);
      assert.match(await res.text(), /Try again in a moment/);
    }

    assert.equal(await quickly('/metrics during the outage', metricsUp), '0');
    const ready = await quickly('readiness during the outage', () => fetch(`${server.url}/health/ready`));
    assert.equal(ready.status, 503);
    assert.match(await ready.text(), /database/);
    const live = await fetch(`${server.url}/health/live`);
    assert.equal(live.status, 200);

    const ended = await quickly('the wait parked across the outage', () => parked);
    assert.equal(ended.json?.id, 9, ended.text);
    assert.ok(ended.json.result, `a tool result, not a JSON-RPC internal error: ${ended.text}`);
    if (ended.json.result.isError) assert.equal(ended.json.result.structuredContent?.error, 'unavailable');

    await cluster.start();

    await waitFor('REST to work again', async () => (await admin.get('/v1/mailboxes')).status === 200, {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    assert.equal(await metricsUp(), '1');
    await waitFor('readiness again', async () => (await fetch(`${server.url}/health/ready`)).status === 200, {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    let client: Client | undefined;
    try {
      client = await connectMcp(server.url, agentSecret);
      const wait = client.callTool({
        name: 'email_await',
        arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: 20 },
      }) as Promise<CallToolResult>;
      await waitFor('the wait to park', async () => (await activeWaits(server.url, 'message')) === 1);
      await ingest(admin, mailboxId, { subject: 'after the outage' });
      const result = await wait;
      assert.notEqual(result.isError, true, JSON.stringify(result.structuredContent));
      assert.match(JSON.stringify(result.structuredContent), /after the outage/);
    } finally {
      await client?.close();
    }
  });
});
