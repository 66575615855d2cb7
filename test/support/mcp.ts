import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** An MCP client exactly as an agent would use it: official SDK, Streamable HTTP, bearer header. */
export async function connectMcp(
  baseUrl: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<Client> {
  const client = new Client({ name: 'alcarta-tests', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}`, ...headers } },
  });
  await client.connect(transport);
  return client;
}

/** Calls a tool that must succeed; returns its structuredContent (and checks the text mirror). */
export async function callOk<T = any>(client: Client, name: string, args: Record<string, unknown> = {}): Promise<T> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  assert.notEqual(result.isError, true, `${name} failed: ${JSON.stringify(result.structuredContent)}`);
  assert.ok(result.structuredContent, `${name} returned no structuredContent`);
  assert.deepEqual(JSON.parse((result.content[0] as { text: string }).text), result.structuredContent);
  return result.structuredContent as T;
}

/** Calls a tool that must fail as a tool error; returns its structuredContent `{error, reason, …}`. */
export async function callError(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<{ error: string; reason: string; message: string; [key: string]: unknown }> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  assert.equal(
    result.isError,
    true,
    `${name} was expected to fail but returned ${JSON.stringify(result.structuredContent)}`,
  );
  const body = result.structuredContent as { error: string; reason: string; message: string };
  assert.equal(typeof body.error, 'string');
  assert.equal(typeof body.reason, 'string');
  assert.equal(typeof body.message, 'string');
  return body;
}

/** The JSON-RPC messages of an SSE response body (its `data:` lines). */
export function sseMessages(text: string): any[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)) as unknown);
}

/** A raw JSON-RPC POST to /mcp, for protocol-level checks the SDK client would not make. */
export async function rawMcp(
  baseUrl: string,
  token: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: any; text: string }> {
  const res = await fetch(new URL('/mcp', baseUrl), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  if (res.headers.get('content-type')?.includes('text/event-stream')) {
    const data = sseMessages(text) as { id?: unknown }[];
    json = data.find((m) => m.id !== undefined) ?? data[0];
  } else {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  return { status: res.status, headers: res.headers, json, text };
}

export interface McpStream {
  status: number;
  headers: Headers;
  /** Everything received so far (SSE frames and `: keepalive` comments). */
  readonly text: string;
  /** Resolves once the response has ended: its JSON-RPC messages, and whether the connection broke. */
  done: Promise<{ messages: any[]; broken: boolean }>;
}

/**
 * A raw JSON-RPC POST to /mcp whose SSE response is read as it arrives, so a test can act when it
 * sees something on the stream (a keep-alive, a progress notification) while the call still blocks.
 */
export async function streamMcp(
  baseUrl: string,
  token: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<McpStream> {
  const res = await fetch(new URL('/mcp', baseUrl), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
      ...headers,
    },
    body: JSON.stringify(body),
  });
  let text = '';
  const decoder = new TextDecoder();
  const reader = res.body!.getReader();
  const done = (async () => {
    let broken = false;
    try {
      for (;;) {
        const { done: ended, value } = await reader.read();
        if (ended) break;
        text += decoder.decode(value, { stream: true });
      }
    } catch {
      broken = true;
    }
    return { messages: sseMessages(text), broken };
  })();
  return {
    status: res.status,
    headers: res.headers,
    get text() {
      return text;
    },
    done,
  };
}
