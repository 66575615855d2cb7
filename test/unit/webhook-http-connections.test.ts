import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createServer, Server } from 'node:http';
import { AddressInfo, createServer as createTcpServer, Server as TcpServer, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { postWebhook, WebhookConnections, WebhookHttpOptions } from '#app/webhooks/webhook-http.js';
import { waitFor } from '../support/wait-for';

/**
 * postWebhook on kept-alive connections (WebhookConnections), against real servers on loopback:
 * a connection is reused while it lasts, every new one is resolved and checked again, and one the
 * endpoint closed as it was reused is retried once on a fresh connection.
 */

/** `moving.test` resolves to whatever `movingAddress` is now. */
let movingAddress = '127.0.0.1';
const lookups: string[] = [];
const lookup = (hostname: string): Promise<string[]> => {
  lookups.push(hostname);
  if (hostname === 'moving.test') return Promise.resolve([movingAddress]);
  return Promise.reject(new Error(`getaddrinfo ENOTFOUND ${hostname}`));
};

const options: WebhookHttpOptions = {
  allowedHosts: ['127.0.0.1'],
  timeoutMs: 5000,
  maxResponseBytes: 64 * 1024,
  lookup,
};

/** Client sockets this process creates while `action` runs. */
async function socketsCreatedBy<T>(action: () => Promise<T>): Promise<{ result: T; created: number }> {
  let created = 0;
  const count = () => created++;
  subscribe('net.client.socket', count);
  try {
    return { result: await action(), created };
  } finally {
    unsubscribe('net.client.socket', count);
  }
}

describe('postWebhook on kept-alive connections', () => {
  let server: Server;
  let port: number;
  const served: string[] = [];
  const connections = new Set<Socket>();
  before(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        served.push(req.url ?? '');
        res.writeHead(204).end();
      });
    });
    server.on('connection', (socket: Socket) => {
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it('reuses one connection for POSTs to the same origin, resolving its name once', async () => {
    movingAddress = '127.0.0.1';
    lookups.length = 0;
    const pool = new WebhookConnections();
    const { result, created } = await socketsCreatedBy(async () => [
      await postWebhook(`http://moving.test:${port}/a`, '{}', {}, options, pool),
      await postWebhook(`http://moving.test:${port}/b`, '{}', {}, options, pool),
      await postWebhook(`http://moving.test:${port}/c`, '{}', {}, options, pool),
    ]);
    assert.deepEqual(
      result.map((r) => r.kind === 'response' && r.status),
      [204, 204, 204],
    );
    assert.equal(created, 1, 'one connection for the three POSTs');
    assert.deepEqual(lookups, ['moving.test']);
    assert.deepEqual(served.slice(-3), ['/a', '/b', '/c']);
  });

  it('checks the address of every new connection: a name that moved to a refused address is refused', async () => {
    movingAddress = '127.0.0.1';
    lookups.length = 0;
    const pool = new WebhookConnections();
    const first = await postWebhook(`http://moving.test:${port}/first`, '{}', {}, options, pool);
    assert.equal(first.kind === 'response' && first.status, 204);
    // The endpoint closes the idle connection, and the name now answers a loopback address that
    // is not allowed.
    server.closeIdleConnections();
    await waitFor('the server to close the idle connection', () => connections.size === 0);
    movingAddress = '127.0.0.2';
    const count = served.length;
    const second = await postWebhook(`http://moving.test:${port}/second`, '{}', {}, options, pool);
    assert.equal(second.kind, 'error', JSON.stringify(second));
    assert.equal(second.kind === 'error' && second.refused, true, JSON.stringify(second));
    assert.match(second.kind === 'error' ? second.error : '', /moving\.test \(127\.0\.0\.2\) is a loopback address/);
    assert.equal(served.length, count, 'nothing was sent');
    assert.ok(lookups.length >= 2, `resolved again for the new connection: ${JSON.stringify(lookups)}`);
  });

  it('a refused target and the timeout are the same as on fresh connections', async () => {
    const pool = new WebhookConnections();
    const refused = await postWebhook(`http://moving.test:${port}/`, '{}', {}, { ...options, allowedHosts: [] }, pool);
    assert.equal(refused.kind === 'error' && refused.refused, true, JSON.stringify(refused));
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const timedOut = await postWebhook(
        `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`,
        '{}',
        {},
        { ...options, timeoutMs: 300 },
        pool,
      );
      assert.match(timedOut.kind === 'error' ? timedOut.error : JSON.stringify(timedOut), /within 300 ms/);
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });
});

describe('postWebhook when the endpoint closes a kept-alive connection as it is reused', () => {
  let tcp: TcpServer;
  let port: number;
  let accepted = 0;
  let requests = 0;
  before(async () => {
    // Answers the first request on each connection (keep-alive), and drops the connection on the
    // second instead of answering: what an endpoint's idle timeout does in a race with a reuse.
    tcp = createTcpServer((socket) => {
      accepted++;
      let seen = 0;
      socket.on('data', (chunk: Buffer) => {
        if (!chunk.toString('latin1').startsWith('POST ')) return;
        requests++;
        seen++;
        if (seen === 1) {
          socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok');
        } else {
          socket.destroy();
        }
      });
    });
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    port = (tcp.address() as AddressInfo).port;
  });
  after(() => tcp.close());

  it('is retried once on a fresh connection, and delivered', async () => {
    const pool = new WebhookConnections();
    const url = `http://127.0.0.1:${port}/`;
    const first = await postWebhook(url, '{}', {}, options, pool);
    assert.equal(first.kind === 'response' && first.status, 200, JSON.stringify(first));
    const second = await postWebhook(url, '{}', {}, options, pool);
    assert.equal(second.kind === 'response' && second.status, 200, JSON.stringify(second));
    assert.equal(requests, 3, 'the dropped request, then its retry');
    assert.equal(accepted, 2, 'the retry came on a new connection');
  });
});
