import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo, isIP, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { postWebhook, WebhookHttpOptions, WebhookHttpOutcome } from '#app/webhooks/webhook-http.js';
import { waitFor } from '../support/wait-for';

/**
 * postWebhook against real HTTP servers on loopback addresses (docs/webhooks.md, "Safe targets").
 * Host names resolve through an injected resolver, so no test asks the real DNS; every refused
 * target is checked to open no socket at all: nothing is ever sent off this host.
 */

interface Receiver {
  server: Server;
  port: number;
  requests: { method: string; url: string; body: string }[];
}

async function receiver(
  host: string,
  answer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end('ok'),
): Promise<Receiver> {
  const requests: Receiver['requests'] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', body });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { server, port: (server.address() as AddressInfo).port, requests };
}

/** Resolves `hooks.test`, `rebound.test` and `localhost` to the loopback address, and nothing else. */
const lookups: string[] = [];
const lookup = (hostname: string): Promise<string[]> => {
  lookups.push(hostname);
  if (['hooks.test', 'rebound.test', 'localhost'].includes(hostname)) return Promise.resolve(['127.0.0.1']);
  return Promise.reject(new Error(`getaddrinfo ENOTFOUND ${hostname}`));
};

function options(extra: Partial<WebhookHttpOptions> = {}): WebhookHttpOptions {
  return { allowedHosts: [], timeoutMs: 5000, maxResponseBytes: 64 * 1024, lookup, ...extra };
}

/**
 * The client sockets this process creates while `action` runs (Node's `net.client.socket`
 * channel), and how many of them connected or began connecting to an address.
 */
async function socketsOpenedBy<T>(
  action: () => Promise<T>,
): Promise<{ result: T; created: number; connected: number }> {
  let created = 0;
  let connected = 0;
  const count = (message: unknown) => {
    created++;
    (message as { socket: Socket }).socket
      .once('connectionAttempt', () => connected++)
      .once('connect', () => connected++);
  };
  subscribe('net.client.socket', count);
  try {
    const result = await action();
    return { result, created, connected };
  } finally {
    unsubscribe('net.client.socket', count);
  }
}

/**
 * Posts to `url` and checks it was refused before any connection: a literal address before a
 * socket exists, a host name in the socket's lookup, before it connects.
 */
async function refusedWithoutConnecting(url: string, extra: Partial<WebhookHttpOptions> = {}): Promise<string> {
  const { result, created, connected } = await socketsOpenedBy(() => postWebhook(url, '{}', {}, options(extra)));
  assert.equal(result.kind, 'error', `${url}: ${JSON.stringify(result)}`);
  assert.equal(result.kind === 'error' && result.refused, true, `${url}: ${JSON.stringify(result)}`);
  assert.equal(connected, 0, `${url}: no connection may be attempted to a refused target`);
  if (isIP(new URL(url).hostname.replace(/^\[(.*)\]$/, '$1'))) assert.equal(created, 0, `${url}: not even a socket`);
  return result.kind === 'error' ? result.error : '';
}

function assertDelivered(outcome: WebhookHttpOutcome, status = 200): void {
  assert.equal(outcome.kind, 'response', JSON.stringify(outcome));
  assert.equal(outcome.kind === 'response' && outcome.status, status);
}

describe('postWebhook on loopback', () => {
  let v4: Receiver;
  let v6: Receiver;
  before(async () => {
    v4 = await receiver('127.0.0.1');
    v6 = await receiver('::1');
  });
  after(() => {
    v4.server.close();
    v6.server.close();
  });

  it('refuses a host name that resolves to a loopback address, at connection time', async () => {
    lookups.length = 0;
    const error = await refusedWithoutConnecting(`http://hooks.test:${v4.port}/in`);
    assert.match(error, /hooks\.test \(127\.0\.0\.1\) is a loopback address/);
    assert.deepEqual(lookups, ['hooks.test'], 'the name was resolved when connecting');
    assert.equal(v4.requests.length, 0);
  });

  it('delivers to that host name when it, or its address, is allowed', async () => {
    const before = v4.requests.length;
    const byName = await socketsOpenedBy(() =>
      postWebhook(
        `http://hooks.test:${v4.port}/in?x=1`,
        '{"type":"message_received"}',
        { 'webhook-id': 'msg_1' },
        options({ allowedHosts: ['hooks.test'] }),
      ),
    );
    assertDelivered(byName.result);
    assert.ok(byName.connected > 0, 'the probe of the refusals sees a connection');
    const byAddress = await postWebhook(
      `http://hooks.test:${v4.port}/in`,
      '{}',
      {},
      options({ allowedHosts: ['127.0.0.1'] }),
    );
    assertDelivered(byAddress);
    assert.deepEqual(v4.requests.slice(before), [
      { method: 'POST', url: '/in?x=1', body: '{"type":"message_received"}' },
      { method: 'POST', url: '/in', body: '{}' },
    ]);
    // Another allowed name does not allow this one.
    await refusedWithoutConnecting(`http://rebound.test:${v4.port}/in`, { allowedHosts: ['hooks.test'] });
  });

  it('refuses the metadata address and literal loopback addresses in every form unless allowed', async () => {
    assert.match(await refusedWithoutConnecting('http://169.254.169.254/latest/meta-data/'), /metadata/);
    assert.match(await refusedWithoutConnecting('http://[fd00:ec2::254]/'), /metadata/);
    // Even a list that allows every loopback form does not allow the metadata service.
    await refusedWithoutConnecting('http://169.254.169.254/', { allowedHosts: ['127.0.0.1', '::1'] });
    const forms = [
      { url: `http://127.0.0.1:${v4.port}/`, receiver: () => v4, allow: '127.0.0.1' },
      { url: `http://127.1:${v4.port}/`, receiver: () => v4, allow: '127.0.0.1' },
      { url: `http://2130706433:${v4.port}/`, receiver: () => v4, allow: '127.0.0.1' },
      { url: `http://0x7f000001:${v4.port}/`, receiver: () => v4, allow: '127.0.0.1' },
      { url: `http://[::ffff:127.0.0.1]:${v4.port}/`, receiver: () => v4, allow: '127.0.0.1' },
      { url: `http://[::1]:${v6.port}/`, receiver: () => v6, allow: '::1' },
      { url: `http://[0:0:0:0:0:0:0:1]:${v6.port}/`, receiver: () => v6, allow: '0::1' },
      { url: `http://localhost:${v4.port}/`, receiver: () => v4, allow: 'localhost' },
    ];
    for (const form of forms) {
      const count = form.receiver().requests.length;
      await refusedWithoutConnecting(form.url);
      assert.equal(form.receiver().requests.length, count, form.url);
      assertDelivered(await postWebhook(form.url, '{}', {}, options({ allowedHosts: [form.allow] })));
      assert.equal(form.receiver().requests.length, count + 1, form.url);
    }
  });

  it('refuses other schemes and credentials without connecting', async () => {
    assert.match(await refusedWithoutConnecting(`ftp://127.0.0.1:${v4.port}/`), /ftp:/);
    assert.match(
      await refusedWithoutConnecting(`http://user:pass@hooks.test:${v4.port}/`, { allowedHosts: ['hooks.test'] }),
      /credentials/,
    );
  });

  it('does not follow a redirect: a 302 is the answer, and its Location gets nothing', async () => {
    const target = await receiver('127.0.0.1');
    const redirecting = await receiver('127.0.0.1', (_req, res) => {
      res.writeHead(302, { location: `http://127.0.0.1:${target.port}/private` });
      res.end();
    });
    try {
      const outcome = await postWebhook(
        `http://hooks.test:${redirecting.port}/`,
        '{}',
        {},
        options({ allowedHosts: ['hooks.test', '127.0.0.1'] }),
      );
      assertDelivered(outcome, 302);
      assert.equal(redirecting.requests.length, 1);
      assert.equal(target.requests.length, 0, 'the Location was not fetched');
    } finally {
      target.server.close();
      redirecting.server.close();
    }
  });

  it('cuts a slow endpoint off after the timeout', async () => {
    let held: ServerResponse | undefined;
    const slow = await receiver('127.0.0.1', (_req, res) => {
      held = res; // never answered
    });
    try {
      const started = Date.now();
      const outcome = await postWebhook(
        `http://hooks.test:${slow.port}/`,
        '{}',
        {},
        options({ allowedHosts: ['hooks.test'], timeoutMs: 300 }),
      );
      assert.equal(outcome.kind, 'error', JSON.stringify(outcome));
      assert.equal(outcome.kind === 'error' && outcome.refused, false);
      assert.match(outcome.kind === 'error' ? outcome.error : '', /within 300 ms/);
      assert.ok(Date.now() - started >= 290, 'not before the timeout');
      assert.ok(held, 'the request reached the endpoint');
      await waitFor('the connection to be closed', () => held?.socket === null || held?.socket?.destroyed);
    } finally {
      slow.server.closeAllConnections();
      slow.server.close();
    }
  });

  it('cuts a slow body off after the timeout as well', async () => {
    const trickling = await receiver('127.0.0.1', (_req, res) => {
      res.writeHead(200);
      res.write('x'); // and never more
    });
    try {
      const outcome = await postWebhook(
        `http://hooks.test:${trickling.port}/`,
        '{}',
        {},
        options({ allowedHosts: ['hooks.test'], timeoutMs: 300 }),
      );
      assert.equal(outcome.kind, 'error', JSON.stringify(outcome));
    } finally {
      trickling.server.closeAllConnections();
      trickling.server.close();
    }
  });

  it('reads a huge answer only up to the cap, then closes the connection', async () => {
    const chunk = Buffer.alloc(16 * 1024, 'a');
    const limit = 512 * 1024 * 1024;
    let written = 0;
    let closed = false;
    const huge = await receiver('127.0.0.1', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.on('close', () => (closed = true));
      const pump = () => {
        while (!closed && written < limit) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    try {
      const outcome = await postWebhook(
        `http://hooks.test:${huge.port}/`,
        '{}',
        {},
        options({ allowedHosts: ['hooks.test'], maxResponseBytes: 64 * 1024 }),
      );
      assertDelivered(outcome);
      assert.equal(outcome.kind === 'response' && outcome.bytesRead, 64 * 1024);
      await waitFor('the endpoint to see the connection closed', () => closed);
      assert.ok(written < limit, `the endpoint stopped writing (${written} bytes) when the reader left`);
    } finally {
      huge.server.closeAllConnections();
      huge.server.close();
    }
  });
});
