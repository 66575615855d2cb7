import assert from 'node:assert/strict';
import { createServer, Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { chromium, Browser, Page } from 'playwright-core';
import { freePort } from '#app/common/net.js';
import { activeWaits } from '../support/metrics';
import { chromiumPath, requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const ALLOW_HEADERS = [
  'authorization',
  'content-type',
  'mcp-protocol-version',
  'mcp-session-id',
  'last-event-id',
  'mcp-method',
  'mcp-name',
];

/** What a page's script gets from one JSON-RPC POST to /mcp: the status and the messages, or the fetch failure. */
type PageCall = { status: number; messages: any[]; exposed: Record<string, string | null> } | { failed: string };

/** Runs one JSON-RPC request from inside `page` with fetch, as a browser MCP client would. */
function callFromPage(page: Page, mcpUrl: string, token: string, body: unknown): Promise<PageCall> {
  return page.evaluate(
    async ({ mcpUrl, token, body }) => {
      try {
        const res = await fetch(mcpUrl, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2025-11-25',
          },
          body: JSON.stringify(body),
        });
        const text = await res.text();
        const messages = text.includes('data: ')
          ? text
              .split('\n')
              .filter((line) => line.startsWith('data: '))
              .map((line) => JSON.parse(line.slice(6)))
          : [JSON.parse(text)];
        const exposed = {
          'www-authenticate': res.headers.get('www-authenticate'),
          'mcp-protocol-version': res.headers.get('mcp-protocol-version'),
        };
        return { status: res.status, messages, exposed };
      } catch (err) {
        return { failed: String(err) };
      }
    },
    { mcpUrl, token, body },
  );
}

/**
 * "Browsers" (docs/operators.md, "Limits and hardening"): /mcp answers CORS preflights for loopback
 * origins and ALCARTA_ALLOWED_ORIGINS, and every answer (results, 401s, errors) carries
 * Access-Control-Allow-Origin; other origins get 403. Proven from a real headless Chromium: pages
 * on allowed origins list tools and run a wait with fetch, a page on another origin is refused.
 * Host names are mapped to 127.0.0.1 inside Chromium.
 */
describe('CORS: browser pages on /mcp', () => {
  let server: TestServer;
  let pages: Server;
  let pagePort: number;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let token: string;
  let mailbox: string;
  let mcpUrl: string;
  const allowedOrigin = () => `http://app.test:${pagePort}`;

  /** A browser test that skips only when Chromium is missing (and the run does not require it). */
  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };

  const openPage = async (origin: string): Promise<Page> => {
    const page = await browser!.newPage();
    await page.goto(`${origin}/`);
    return page;
  };

  before(async () => {
    pagePort = await freePort();
    pages = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>page</title><p>a page</p>');
    });
    await new Promise<void>((resolve) => pages.listen(pagePort, '127.0.0.1', resolve));
    server = await startTestServer({ env: { ALCARTA_ALLOWED_ORIGINS: `http://app.test:${pagePort}` } });
    mcpUrl = `${server.url}/mcp`;
    mailbox = await createMailbox(server.admin);
    token = (await createToken(server.admin, { scopes: ['mail:read'], mailboxes: [mailbox] })).secret;
    skipReason = requireSystemPackage('chromium');
    if (skipReason) return;
    browser = await chromium.launch({
      executablePath: chromiumPath(),
      args: ['--no-sandbox', '--host-resolver-rules=MAP app.test 127.0.0.1, MAP evil.test 127.0.0.1'],
    });
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    await new Promise((resolve) => pages?.close(resolve));
  });

  describe('over plain HTTP', () => {
    const preflight = (origin: string, url = mcpUrl) =>
      fetch(url, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization,content-type,mcp-protocol-version',
        },
      });

    it('answers a preflight from an allowed origin with the CORS headers', async () => {
      for (const origin of [allowedOrigin(), 'http://localhost:5173', 'http://127.0.0.1:6274']) {
        const res = await preflight(origin);
        assert.equal(res.status, 204, origin);
        assert.equal(res.headers.get('access-control-allow-origin'), origin);
        assert.equal(res.headers.get('access-control-allow-methods'), 'POST');
        const allowed = res.headers.get('access-control-allow-headers')!.split(/,\s*/);
        for (const header of ALLOW_HEADERS) assert.ok(allowed.includes(header), `${origin}: ${header} not allowed`);
        const exposed = res.headers.get('access-control-expose-headers')!.split(/,\s*/);
        assert.ok(exposed.includes('www-authenticate') && exposed.includes('mcp-protocol-version'));
        assert.match(res.headers.get('vary') ?? '', /origin/i);
      }
    });

    it('refuses a preflight from any other origin with 403 and no CORS headers', async () => {
      for (const origin of [`http://evil.test:${pagePort}`, 'https://app.test', 'null']) {
        const res = await preflight(origin);
        assert.equal(res.status, 403, origin);
        assert.equal(res.headers.get('access-control-allow-origin'), null);
      }
    });

    it('puts Allow-Origin and Expose-Headers on results, 401s and errors of allowed origins', async () => {
      const origin = allowedOrigin();
      const post = (body: string, auth?: string) =>
        fetch(mcpUrl, {
          method: 'POST',
          headers: {
            origin,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...(auth ? { authorization: auth } : {}),
          },
          body,
        });
      const list = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
      for (const [what, res] of [
        ['a result', await post(list, `Bearer ${token}`)],
        ['a 401', await post(list)],
        ['a parse error', await post('{"jsonrpc":', `Bearer ${token}`)],
      ] as const) {
        assert.equal(res.headers.get('access-control-allow-origin'), origin, what);
        assert.match(res.headers.get('access-control-expose-headers') ?? '', /www-authenticate/, what);
        await res.body?.cancel();
      }
    });
  });

  describe('from headless Chromium', () => {
    browserIt('a page on an allowed origin lists the tools and runs a wait', async () => {
      const page = await openPage(allowedOrigin());
      try {
        const listed = await callFromPage(page, mcpUrl, token, {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/list',
          params: {},
        });
        assert.ok('status' in listed, `the fetch failed: ${JSON.stringify(listed)}`);
        assert.equal(listed.status, 200);
        const names = listed.messages[0].result.tools.map((t: { name: string }) => t.name);
        assert.ok(names.includes('email_await'), names.join(', '));

        const wait = callFromPage(page, mcpUrl, token, {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: {
            name: 'email_await',
            arguments: { event: { type: 'message_received', mailbox_id: mailbox }, timeout_seconds: 30 },
          },
        });
        await waitFor('the wait parked', async () => (await activeWaits(server.url, 'message')) === 1);
        const id = await ingest(server.admin, mailbox, { subject: 'for the browser' });
        const result = await wait;
        assert.ok('status' in result, `the fetch failed: ${JSON.stringify(result)}`);
        const content = result.messages.find((m) => m.id === 2).result.structuredContent;
        assert.equal(content.matched, true);
        assert.deepEqual(
          content.events.map((e: { message_id: string }) => e.message_id),
          [id],
        );
      } finally {
        await page.close();
      }
    });

    browserIt('a page on a loopback origin may call, and reads the 401 challenge without a token', async () => {
      const page = await openPage(`http://127.0.0.1:${pagePort}`);
      try {
        const unauthorised = await callFromPage(page, mcpUrl, 'alc_not-a-token', {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/list',
          params: {},
        });
        assert.ok('status' in unauthorised, `the fetch failed: ${JSON.stringify(unauthorised)}`);
        assert.equal(unauthorised.status, 401);
        assert.match(unauthorised.exposed['www-authenticate'] ?? '', /^Bearer/);
      } finally {
        await page.close();
      }
    });

    browserIt('a page on another origin is refused', async () => {
      const page = await openPage(`http://evil.test:${pagePort}`);
      try {
        const refused = await callFromPage(page, mcpUrl, token, {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/list',
          params: {},
        });
        assert.ok('failed' in refused, `the page read a response: ${JSON.stringify(refused)}`);
        assert.match(refused.failed, /TypeError/);
      } finally {
        await page.close();
      }
    });
  });
});
