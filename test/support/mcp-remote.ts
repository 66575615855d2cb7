import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { waitFor } from './wait-for';

/** mcp-remote's stdio proxy, run by this Node as an MCP host would run `npx mcp-remote`. */
const PROXY = join(dirname(require.resolve('mcp-remote/package.json')), 'dist', 'proxy.js');

export interface McpRemote {
  /** An MCP client (the official SDK's) speaking to mcp-remote over stdio, as Claude Desktop does. */
  client: Client;
  /** The access token mcp-remote stored after signing in (its token cache, `…_tokens.json`). */
  accessToken(): Promise<string>;
  /** What mcp-remote printed on stderr so far. */
  log(): string;
  close(): Promise<void>;
}

/**
 * Runs the npm package `mcp-remote` against `serverUrl` (`…/mcp`) with its own token cache
 * (MCP_REMOTE_CONFIG_DIR). mcp-remote opens the authorization URL with the `open` package, which on
 * Linux without a display runs `$BROWSER <url>`: BROWSER is a two-line script that records the URL,
 * and `onAuthorizationUrl` plays the person's browser (Chromium in the tests). Resolves once the
 * MCP client is connected through the proxy, which is after mcp-remote signed in.
 */
export async function startMcpRemote(
  serverUrl: string,
  args: string[],
  onAuthorizationUrl?: (url: URL) => Promise<void>,
): Promise<McpRemote> {
  const home = await mkdtemp(join(tmpdir(), 'mcp-remote-'));
  const urlFile = join(home, 'authorization-url');
  const browser = join(home, 'record-url');
  await writeFile(browser, `#!/bin/sh\nprintf '%s\\n' "$1" >> '${urlFile}'\n`);
  await chmod(browser, 0o755);
  let stderr = '';
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [PROXY, serverUrl, ...args, '--allow-http'],
    env: {
      ...(process.env as Record<string, string>),
      MCP_REMOTE_CONFIG_DIR: home,
      BROWSER: browser,
      DISPLAY: '',
      WAYLAND_DISPLAY: '',
    },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const client = new Client({ name: 'mcp-remote-host', version: '1.0.0' });
  const connected = client.connect(transport);
  const authorizing = onAuthorizationUrl
    ? waitFor(
        'mcp-remote to open the authorization URL',
        async () => (await readFile(urlFile, 'utf8').catch(() => '')).split('\n')[0] || undefined,
        { timeoutMs: 30_000, intervalMs: 50 },
      ).then((url) => onAuthorizationUrl(new URL(url)))
    : Promise.resolve();
  const close = async () => {
    await client.close().catch(() => undefined);
    await rm(home, { recursive: true, force: true });
  };
  try {
    await Promise.all([connected, authorizing]);
  } catch (err) {
    await close();
    throw new Error(`mcp-remote did not connect: ${(err as Error).message}\n--- mcp-remote stderr ---\n${stderr}`, {
      cause: err,
    });
  }
  return {
    client,
    log: () => stderr,
    accessToken: async () => {
      const dir = join(home, 'mcp-remote-v1');
      const file = (await readdir(dir)).find((name) => name.endsWith('_tokens.json'));
      if (!file) throw new Error(`mcp-remote stored no tokens in ${dir}`);
      return (JSON.parse(await readFile(join(dir, file), 'utf8')) as { access_token: string }).access_token;
    },
    close,
  };
}
