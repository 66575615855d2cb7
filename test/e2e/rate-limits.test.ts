import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { validateEnvironment } from '#app/config/environment.js';
import { rawMcp } from '../support/mcp';
import { RestClient, RestResponse } from '../support/rest';
import { createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** One request per second, bursts of two: a burst of requests is refused whatever the machine's load. */
const PER_SECOND = 1;

/**
 * "Rate limits" (docs/operators.md, "Limits and hardening"): each credential may make
 * ALCARTA_RATE_LIMIT_PER_SECOND requests per second on a replica, in bursts of twice that; above it
 * REST answers 429 `limit_exceeded` / `rate_limited` and /mcp a JSON-RPC error, both with
 * Retry-After. Other credentials are not affected, and 0 turns limiting off.
 */
describe('rate limits', () => {
  let server: TestServer;
  let unlimited: TestServer;

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_RATE_LIMIT_PER_SECOND: String(PER_SECOND) } });
    unlimited = await startTestServer({ env: { ALCARTA_RATE_LIMIT_PER_SECOND: '0' } });
  });

  after(async () => {
    await server?.close();
    await unlimited?.close();
  });

  const burst = (client: RestClient, n: number): Promise<RestResponse[]> =>
    Promise.all(Array.from({ length: n }, () => client.get('/v1/mailboxes')));

  it('answers 429 with Retry-After above the burst, per credential, on REST and /mcp', async () => {
    const limited = await createToken(server.admin, { scopes: ['admin'], mailboxes: ['*'] });
    const other = await createToken(server.admin, { scopes: ['admin'], mailboxes: ['*'] });
    const client = server.admin.withToken(limited.secret);

    const started = Date.now();
    const answers = await burst(client, 20);
    const refilled = Math.ceil(((Date.now() - started) / 1000) * PER_SECOND);
    const ok = answers.filter((r) => r.status === 200).length;
    const refused = answers.filter((r) => r.status === 429);
    assert.ok(ok >= PER_SECOND * 2, `the burst is served (${ok})`);
    assert.ok(ok <= PER_SECOND * 2 + refilled, `${ok} answered, at most ${PER_SECOND * 2} + ${refilled} refilled`);
    assert.equal(refused.length, answers.length - ok, 'the others are refused');
    for (const r of refused) {
      assert.equal(r.body.error, 'limit_exceeded');
      assert.equal(r.body.reason, 'rate_limited');
      assert.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After');
    }

    const mcp = await rawMcp(server.url, limited.secret, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    assert.equal(mcp.status, 429, mcp.text);
    assert.equal(mcp.json?.jsonrpc, '2.0');
    assert.equal(typeof mcp.json?.error?.code, 'number');
    assert.ok(Number(mcp.headers.get('retry-after')) >= 1);

    // Another credential has a bucket of its own.
    assert.equal((await server.admin.withToken(other.secret).get('/v1/mailboxes')).status, 200);
    // The bucket refills: the limited token is served again.
    await waitFor('the bucket to refill', async () => (await client.get('/v1/mailboxes')).status === 200, {
      timeoutMs: 5000,
      intervalMs: 250,
    });
  });

  it('is on by default (50 per second, bursts of 100) and off with 0', async () => {
    assert.equal(validateEnvironment({}).ALCARTA_RATE_LIMIT_PER_SECOND, 50);
    const answers = await burst(unlimited.admin, 250);
    assert.deepEqual(
      answers.filter((r) => r.status !== 200).map((r) => r.status),
      [],
    );
  });
});
