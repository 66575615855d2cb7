import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

const run = promisify(execFile);

/**
 * The MCP Inspector, pinned. It needs Node >= 22.19 and pulls in a web UI, a TUI and a native
 * keyring module, so it is not a devDependency: npx fetches exactly this version from the npm registry.
 */
const INSPECTOR = '@modelcontextprotocol/inspector@2.12.0';

/** A Node binary the Inspector runs on: this one when new enough, else Node 24 from the npm package `node@24`. */
async function modernNode(): Promise<string> {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major > 22 || (major === 22 && minor >= 19)) return process.execPath;
  const { stdout } = await run('npx', ['-y', 'node@24', '-p', 'process.execPath'], { timeout: 180_000 });
  return stdout.trim();
}

/**
 * docs/agents.md "Protocol revisions" with a client nobody here wrote: the MCP Inspector CLI with
 * `--protocol-era modern` (pinned to 2026-07-28, no fallback to initialize) against a real server,
 * over HTTP with the token as a header, as a CI script would use it.
 */
describe('the MCP Inspector CLI at 2026-07-28', () => {
  let server: TestServer;
  let mailbox: string;
  let token: string;
  let home: string;
  let env: NodeJS.ProcessEnv;

  /** Runs one Inspector CLI request against the server; returns its exit code, stdout and stderr. */
  const inspector = async (...args: string[]) => {
    try {
      const { stdout, stderr } = await run(
        'npx',
        [
          '-y',
          INSPECTOR,
          '--cli',
          '--server-url',
          new URL('/mcp', server.url).toString(),
          '--transport',
          'http',
          '--protocol-era',
          'modern',
          '--header',
          `Authorization: Bearer ${token}`,
          '--stored-auth-only',
          '--format',
          'json',
          ...args,
        ],
        { env, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 },
      );
      return { code: 0, stdout, stderr };
    } catch (err) {
      const failed = err as { code?: number; stdout?: string; stderr?: string };
      if (typeof failed.code !== 'number') throw err;
      return { code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
    }
  };

  before(async () => {
    server = await startTestServer();
    mailbox = await createMailbox(server.admin);
    token = (await createToken(server.admin, { scopes: ['mail:read', 'approvals:read'], mailboxes: [mailbox] })).secret;
    // Its own home: the Inspector keeps a catalog and OAuth state there.
    home = await mkdtemp(join(tmpdir(), 'alcarta-inspector-'));
    const node = await modernNode();
    env = {
      ...process.env,
      HOME: home,
      MCP_STORAGE_DIR: join(home, 'storage'),
      MCP_AUTO_OPEN_ENABLED: 'false',
      // npx and the Inspector's `#!/usr/bin/env node` both run on the modern Node.
      PATH: `${dirname(node)}:${process.env.PATH ?? ''}`,
    };
  });

  after(async () => {
    await server?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('connects at 2026-07-28 (server/discover, no initialize)', async () => {
    const { code, stdout, stderr } = await inspector('--method', 'initialize');
    assert.equal(code, 0, stderr);
    const out = JSON.parse(stdout);
    const probe = out.result ?? out;
    assert.equal(probe.protocolVersion, '2026-07-28', stdout);
    assert.equal(probe.serverInfo.name, 'alcarta');
    assert.deepEqual(probe.capabilities.tools, { listChanged: false });
  });

  it('tools/list: the token’s tools, as the 2026-07-28 list', async () => {
    const { code, stdout, stderr } = await inspector('--method', 'tools/list');
    assert.equal(code, 0, stderr);
    const out = JSON.parse(stdout);
    const tools = (out.result?.tools ?? out.tools) as Array<{ name: string; inputSchema: object }>;
    assert.ok(Array.isArray(tools), stdout);
    const names = tools.map((t) => t.name);
    for (const name of ['list_mailboxes', 'list_messages', 'get_message', 'email_await', 'monitor_approval']) {
      assert.ok(names.includes(name), `${name} missing from ${names.join(', ')}`);
    }
    assert.ok(!names.includes('send_email'), 'no send_email without mail:send');
  });

  it('tools/call: list_mailboxes returns the token’s mailbox', async () => {
    const { code, stdout, stderr } = await inspector('--method', 'tools/call', '--tool-name', 'list_mailboxes');
    assert.equal(code, 0, stderr);
    const out = JSON.parse(stdout);
    const result = out.result ?? out;
    assert.notEqual(result.isError, true, stdout);
    assert.deepEqual(
      result.structuredContent.mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id),
      [mailbox],
    );
  });

  it('tools/call with a tool error exits 5 and prints the tool’s error', async () => {
    const { code, stdout } = await inspector(
      '--method',
      'tools/call',
      '--tool-name',
      'get_message',
      '--tool-args-json',
      '{"message_id":"msg_doesNotExist"}',
    );
    assert.equal(code, 5, stdout);
    const out = JSON.parse(stdout);
    const result = out.result ?? out;
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.error, 'not_found');
  });
});
