import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

export const MODERN = '2026-07-28';

/**
 * An MCP client of revision 2026-07-28 as an agent would use it: the official v2 SDK client
 * (`@modelcontextprotocol/client`), pinned to the revision, Streamable HTTP, bearer header. It
 * probes with `server/discover` and sends the revision and its capabilities in every request's `_meta`.
 */
export async function connectMcp2026(
  baseUrl: string,
  token: string,
  options: { headers?: Record<string, string>; capabilities?: Record<string, unknown> } = {},
): Promise<Client> {
  const client = new Client(
    { name: 'alcarta-tests-2026', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: MODERN } }, capabilities: options.capabilities ?? {} },
  );
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}`, ...options.headers } },
  });
  await client.connect(transport);
  assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
  return client;
}

/** Calls a tool that must succeed at 2026-07-28; returns its structuredContent (and checks the text mirror). */
export async function callOk2026<T = any>(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  options?: Parameters<Client['callTool']>[1],
): Promise<T> {
  const result = await client.callTool({ name, arguments: args }, options);
  assert.notEqual(result.isError, true, `${name} failed: ${JSON.stringify(result.structuredContent)}`);
  assert.ok(result.structuredContent, `${name} returned no structuredContent`);
  assert.deepEqual(JSON.parse((result.content[0] as { text: string }).text), result.structuredContent);
  return result.structuredContent as T;
}

/** The `_meta` envelope of a raw 2026-07-28 request. */
export function envelope(capabilities: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': capabilities,
    'io.modelcontextprotocol/clientInfo': { name: 'raw-tests', version: '1.0.0' },
  };
}

/** The standard headers of a raw 2026-07-28 request: the revision, `Mcp-Method` and, when given, `Mcp-Name`. */
export function revision2026Headers(method: string, name?: string): Record<string, string> {
  return { 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(name !== undefined && { 'mcp-name': name }) };
}
