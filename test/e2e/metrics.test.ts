import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** docs/operators.md: GET /metrics, Prometheus text, no token. */
describe('metrics', () => {
  let server: TestServer;
  let agent: Client;
  let mailboxId: string;

  before(async () => {
    server = await startTestServer();
    agent = await connectMcp(server.url, server.adminToken);
    mailboxId = await createMailbox(server.admin);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  const scrape = async () => {
    const res = await fetch(`${server.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    return res.text();
  };
  const sample = (text: string, name: string, labels = ''): number | undefined => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
    return line === undefined ? undefined : Number(line.split(' ').pop());
  };

  it('needs no token and serves process metrics', async () => {
    const text = await scrape();
    assert.ok(sample(text, 'alcarta_process_cpu_user_seconds_total') !== undefined, 'process metrics');
    assert.equal(sample(text, 'alcarta_listener_reconnects_total'), 0);
  });

  it('counts parked waits by kind and delivery, and records the wake latency of a woken wait', async () => {
    const before = await scrape();
    const woken = sample(before, 'alcarta_wake_latency_seconds_count', 'kind="message"') ?? 0;
    const waiting = callOk(agent, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailboxId },
      timeout_seconds: 30,
    });
    await waitFor('the wait to park', async () => (await activeWaits(server.url, 'message')) === 1);
    const parked = await scrape();
    assert.equal(sample(parked, 'alcarta_active_waits', 'kind="message",delivery="poll"'), 1);
    assert.equal(sample(parked, 'alcarta_active_waits', 'kind="request",delivery="poll"'), 0);
    assert.equal(sample(parked, 'alcarta_active_waits', 'kind="message",delivery="websocket"'), 0);
    await ingest(server.admin, mailboxId);
    assert.equal((await waiting).matched, true);
    const afterWake = await scrape();
    assert.equal(sample(afterWake, 'alcarta_wake_latency_seconds_count', 'kind="message"'), woken + 1);
    assert.equal(sample(afterWake, 'alcarta_active_waits', 'kind="message",delivery="poll"'), 0);
  });

  it('counts tasks by status', async () => {
    const text = await scrape();
    for (const status of ['working', 'input_required', 'completed', 'failed', 'cancelled']) {
      assert.equal(typeof sample(text, 'alcarta_tasks', `status="${status}"`), 'number', status);
    }
  });

  it('records HTTP request durations under the route pattern, not the path', async () => {
    await ingest(server.admin, mailboxId);
    const text = await scrape();
    assert.ok(
      text.includes(
        'alcarta_http_request_duration_seconds_count{method="POST",route="/v1/mailboxes/:mailbox_id/messages",status="201"}',
      ),
      'ingest recorded under its route pattern',
    );
    assert.ok(!text.includes(mailboxId), 'no ids in label values');
  });
});
