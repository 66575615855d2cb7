/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`) against a real Alcarta:
 *
 *   npm run test:conformance -- [extra conformance arguments…]
 *
 * Starts the server (from source, like the tests) on a fresh database (DATABASE_URL's server, or a
 * throwaway embedded PostgreSQL), with one mailbox and an agent token, and runs `conformance
 * server` against it at revision 2026-07-28 with the expected-failures baseline of
 * test/conformance/. Exits with the suite's exit code: 0 when every scenario passes or fails
 * exactly as the baseline says.
 *
 * The suite has no way to send an Authorization header, and Alcarta answers 401 to every /mcp
 * request without a bearer token (docs/agents.md "Tools"). So the suite talks to a loopback HTTP
 * hop that adds the token's `Authorization: Bearer` header to each request and forwards everything
 * else unchanged (method, path, Host, Origin, the MCP headers, the body, the streamed response),
 * like an authenticating gateway in front of the server. Auth itself is covered by
 * test/e2e/auth.test.ts and test/e2e/mcp-2026.test.ts.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer, request, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { LocalDatabase, openEmbeddedPostgres } from '#app/database/embedded-postgres.js';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

/** The newest release of the suite with the 2026-07-28 server scenarios; it needs Node >= 22.19. */
const CONFORMANCE = '@modelcontextprotocol/conformance@0.2.0-alpha.12';
const REVISION = '2026-07-28';
const BASELINE = resolve(__dirname, '../../test/conformance/expected-failures-2026-07-28.yml');

/** A loopback hop to `target` that adds `authorization` to every request and changes nothing else. */
async function authenticatingHop(target: string, authorization: string): Promise<Server> {
  const upstream = new URL(target);
  const hop = createServer((req, res) => {
    const forwarded = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, authorization },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.destroy());
    // The client going away is its cancellation (2026-07-28): pass it on.
    res.on('close', () => forwarded.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((ok) => hop.listen(0, '127.0.0.1', ok));
  return hop;
}

async function main(): Promise<number> {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 22 || (major === 22 && minor < 19)) {
    process.stderr.write(`${CONFORMANCE} needs Node >= 22.19 (this is ${process.version}): run it with Node 24.\n`);
    return 1;
  }
  // Holds the suite's results (its --output-dir) and, without DATABASE_URL, the embedded cluster.
  const dir = await mkdtemp(join(tmpdir(), 'alcarta-conformance-'));
  let embedded: LocalDatabase | undefined;
  let server: TestServer | undefined;
  let hop: Server | undefined;
  try {
    if (!process.env.DATABASE_URL) {
      await chmod(dir, 0o755); // the postgres OS user must reach it when we run as root
      embedded = await openEmbeddedPostgres(join(dir, 'cluster'), { persistent: false });
      process.env.DATABASE_URL = embedded.url;
    }
    server = await startTestServer();
    const mailbox = await createMailbox(server.admin);
    const token = await createToken(server.admin, {
      name: 'conformance suite',
      scopes: ['mail:read', 'mail:send', 'approvals:read'],
      mailboxes: [mailbox],
    });
    hop = await authenticatingHop(server.url, `Bearer ${token.secret}`);
    const url = `http://127.0.0.1:${(hop.address() as AddressInfo).port}/mcp`;
    process.stdout.write(`Alcarta at ${server.url}; the suite talks to ${url} (adds the bearer token)\n`);

    const args = [
      '-y',
      CONFORMANCE,
      'server',
      '--url',
      url,
      '--requirements',
      REVISION,
      '--expected-failures',
      BASELINE,
      '--output-dir',
      // ALCARTA_CONFORMANCE_RESULTS keeps the per-check results (checks.json per scenario) for a look.
      process.env.ALCARTA_CONFORMANCE_RESULTS ?? join(dir, 'results'),
      ...process.argv.slice(2),
    ];
    const child = spawn('npx', args, { stdio: 'inherit' });
    return await new Promise<number>((ok) => child.on('exit', (code, signal) => ok(code ?? (signal ? 1 : 0))));
  } finally {
    hop?.closeAllConnections();
    hop?.close();
    await server?.close();
    await embedded?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`conformance run failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
