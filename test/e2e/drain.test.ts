import assert from 'node:assert/strict';
import { Agent, get, IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { DrainState } from '#app/lifecycle/drain-state.js';
import { createTestDatabase, TestDatabase } from '../support/database';
import { scrubbed, spawnServer } from '../support/spawned-server';
import { startTestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const GRACE_SECONDS = 10;

interface Probed {
  headers: IncomingMessage['headers'];
  socket: Socket;
}

/** One GET through `agent`; resolves with the response (body read) and its connection, or the error. */
function probe(url: string, agent: Agent): Promise<Probed | Error> {
  return new Promise((resolve) => {
    const req = get(url, { agent }, (res) => {
      const socket = res.socket;
      res.resume();
      res.once('end', () => resolve({ headers: res.headers, socket }));
      res.once('error', resolve);
    });
    req.once('error', resolve);
  });
}

/**
 * "Drain with keep-alive connections" (docs/operators.md, "Limits and hardening"): while draining,
 * responses carry `Connection: close` and idle keep-alive connections are closed, so a replica
 * exits 0 promptly even when a client (a health prober, a load balancer) keeps reusing one
 * connection.
 */
describe('drain with keep-alive connections', () => {
  const databases: TestDatabase[] = [];
  after(async () => {
    for (const db of databases) await db.drop();
  });

  it('answers with Connection: close once draining, and closes that connection', async () => {
    const server = await startTestServer();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await probe(`${server.url}/health/live`, agent);
      assert.ok(!(first instanceof Error), first instanceof Error ? first.message : '');
      assert.notEqual(first.headers.connection, 'close', 'keep-alive before the drain');
      const socket = first.socket;

      await server.running.app.get(DrainState).begin();
      const closed = new Promise<void>((resolve) =>
        socket.destroyed ? resolve() : socket.once('close', () => resolve()),
      );
      const during = await probe(`${server.url}/health/live`, agent);
      assert.ok(!(during instanceof Error), during instanceof Error ? during.message : '');
      assert.equal(during.socket, socket, 'the same keep-alive connection was reused');
      assert.equal(during.headers.connection, 'close');
      await closed;
    } finally {
      agent.destroy();
      await server.close();
    }
  });

  it('exits 0 well within the grace period while clients keep reusing their keep-alive connections', async () => {
    const db = await createTestDatabase();
    databases.push(db);
    const server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS),
    });
    // A readiness prober every 50 ms, and a client that sends its next request as soon as the last
    // one is answered: each reuses one keep-alive connection, which is rarely idle.
    const agents = [new Agent({ keepAlive: true, maxSockets: 1 }), new Agent({ keepAlive: true, maxSockets: 1 })];
    let answered = 0;
    let running = true;
    const client = async (agent: Agent, pauseMs: number) => {
      while (running) {
        const res = await probe(`${server.url}/health/ready`, agent);
        if (!(res instanceof Error)) answered++;
        await new Promise((r) => setTimeout(r, res instanceof Error ? 50 : pauseMs));
      }
    };
    const clients = Promise.all([client(agents[0], 50), client(agents[1], 0)]);
    try {
      await waitFor('the clients to be answered on their connections', () => answered >= 10);
      const signalled = Date.now();
      const code = await server.stop('SIGTERM');
      const took = Date.now() - signalled;
      assert.equal(code, 0, `exit code; stderr:\n${scrubbed(server.stderr())}`);
      assert.ok(took < (GRACE_SECONDS * 1000) / 2, `exited ${took} ms after SIGTERM`);
    } finally {
      running = false;
      await clients;
      for (const agent of agents) agent.destroy();
    }
  });
});
