import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { LocalCluster, startLocalCluster } from '../tools/local-cluster';
import { createTestDatabase, TestDatabase } from '../support/database';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { RestClient } from '../support/rest';
import { requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, ingest, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { openOk, OpenedSocket } from '../support/wait-socket';

/**
 * docs/operators.md "Replicas and shutdown": the local multi-replica deployment (`npm run
 * cluster`), two replicas behind nginx on one database. Poll, websocket and task waits go through
 * the balancer while one replica is restarted (SIGTERM, then started again): every waiter ends with
 * a result, a client that re-issues after `shutdown` with its `next_cursor` finds the match, and no
 * task is lost.
 */
describe('local cluster: waits ride through a replica restart', { skip: requireSystemPackage('nginx-light') }, () => {
  let db: TestDatabase;
  let cluster: LocalCluster | undefined;
  let agent: Client;
  let api: RestClient;
  let mailboxId: string;
  const adminToken = randomSecret();

  before(async () => {
    db = await createTestDatabase();
    cluster = await startLocalCluster({
      replicas: 2,
      port: 0,
      databaseUrl: db.url,
      env: {
        ALCARTA_BOOTSTRAP_TOKEN: adminToken,
        ALCARTA_LOG_LEVEL: 'warn',
        ALCARTA_KEEPALIVE_SECONDS: '1',
        ALCARTA_WAIT_RECHECK_SECONDS: '2',
      },
      output: () => undefined,
    });
    const admin = new RestClient(cluster.url, adminToken);
    mailboxId = await createMailbox(admin);
    const token = await createToken(admin, {
      scopes: ['mail:read', 'mail:ingest', 'approvals:read'],
      mailboxes: [mailboxId],
    });
    api = admin.withToken(token.secret);
    agent = await connectMcp(cluster.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await cluster?.stop();
    await db?.drop();
  });

  it('every waiter ends with a result, re-issues find the match, no task is lost', async () => {
    const [replica1] = cluster!.replicas;
    const { next_cursor: cursor } = await callOk(agent, 'list_messages', { mailbox_id: mailboxId });
    const event = { type: 'message_received', mailbox_id: mailboxId };

    // Poll waits (below the SDK client's 60 s request timeout): nginx balances them over both replicas.
    const settled: any[] = [];
    const polls = Array.from({ length: 6 }, () =>
      callOk(agent, 'email_await', { event, since_cursor: cursor, timeout_seconds: 55 }).then((r) => {
        settled.push(r);
        return r;
      }),
    );
    const parkedOnAll = async () =>
      (await Promise.all(cluster!.replicas.map((r) => activeWaits(r.url)))).reduce((a, b) => a + b, 0);
    await waitFor('all 6 poll waits parked', async () => (await parkedOnAll()) === 6, { timeoutMs: 30_000 });
    assert.ok((await activeWaits(replica1.url)) >= 1, 'the balancer sent some waits to replica 1');
    // Websocket waits, with their sockets open through the balancer.
    const sockets: Array<{ waitId: string; socket: OpenedSocket }> = [];
    for (let i = 0; i < 4; i++) {
      const d = await callOk(agent, 'email_await', {
        event,
        since_cursor: cursor,
        timeout_seconds: 55,
        delivery: 'websocket',
      });
      assert.ok(d.websocket_url.startsWith(cluster!.url.replace('http', 'ws')), 'the URL points at the balancer');
      const socket = await openOk(d.websocket_url);
      assert.equal((await socket.frame(1)).type, 'ready');
      sockets.push({ waitId: d.wait_id, socket });
    }
    // Tasks.
    const tasks: string[] = [];
    for (let i = 0; i < 3; i++) {
      const stream = agent.experimental.tasks.callToolStream(
        { name: 'email_await', arguments: { event, since_cursor: cursor, timeout_seconds: 55 } },
        CallToolResultSchema,
        { task: { ttl: 600_000 } },
      );
      for await (const message of stream) {
        if (message.type === 'taskCreated') {
          tasks.push(message.task.taskId);
          break;
        }
      }
    }

    // Restart replica 1: it drains (SIGTERM, exit 0) — its waits answer `shutdown` — then comes back.
    const parkedOn1 = await activeWaits(replica1.url);
    assert.equal(await replica1.stop('SIGTERM'), 0);
    await waitFor('the waits of replica 1 to be answered', () => settled.length >= parkedOn1);
    const interrupted = settled.filter((r) => r.shutdown);
    assert.equal(interrupted.length, parkedOn1, 'exactly the waits of replica 1 were answered, with shutdown');
    for (const r of interrupted) {
      assert.equal(r.timed_out, false);
      assert.equal(typeof r.next_cursor, 'string');
    }
    await replica1.start();

    // Clients re-issue at once with their next_cursor; sockets of replica 1 fall back to wait_id.
    const reissued = interrupted.map((r) =>
      callOk(agent, 'email_await', { event, since_cursor: r.next_cursor, timeout_seconds: 55 }),
    );
    await waitFor('the re-issued waits to park', async () => (await parkedOnAll()) === 6);

    const messageId = await ingest(api, mailboxId, { subject: 'after the restart' });

    const pollResults = await Promise.all(polls);
    for (const r of [...pollResults.filter((p) => !p.shutdown), ...(await Promise.all(reissued))]) {
      assert.equal(r.matched, true);
      assert.deepEqual(
        r.events.map((e: { message_id: string }) => e.message_id),
        [messageId],
      );
    }
    for (const { waitId, socket } of sockets) {
      const { code } = await socket.closed;
      const delivered = socket.frames.find((f) => f.type === 'result');
      assert.ok(delivered, 'every socket got exactly one result');
      assert.equal(socket.frames.filter((f) => f.type === 'result').length, 1);
      if (code === 1012) {
        assert.equal(delivered.shutdown, true);
        // The fallback: the same wait, polled through the balancer, holds the match.
        const polled = await callOk(agent, 'email_await', { wait_id: waitId, timeout_seconds: 60 });
        assert.equal(polled.matched, true);
        assert.equal(polled.events[0].message_id, messageId);
      } else {
        assert.equal(code, 1000);
        assert.equal(delivered.matched, true);
        assert.equal(delivered.events[0].message_id, messageId);
      }
    }
    for (const taskId of tasks) {
      const result = await agent.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      const content = result.structuredContent as { matched: boolean; events: Array<{ message_id: string }> };
      assert.equal(content.matched, true, `task ${taskId}`);
      assert.equal(content.events[0].message_id, messageId);
      assert.equal((await agent.experimental.tasks.getTask(taskId)).status, 'completed');
    }
  });
});
