import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/client';
import type { RawClientDispatch, TaskEnabledSession } from '@modelcontextprotocol/ext-tasks/client';
import { connectMcp2026, envelope, MODERN, revision2026Headers } from './mcp-2026';
import { rawMcp } from './mcp';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** The per-request client capabilities of a client that declares the Tasks extension. */
export const TASKS_CAPABILITIES = { extensions: { [TASKS_EXTENSION]: {} } };

/**
 * `@modelcontextprotocol/ext-tasks` is ESM only (its exports offer only the "import" condition) and
 * the tests are CommonJS, so it must be loaded with a real `import()`. From source, SWC compiles
 * every `import()` it sees into `require()`, which that export refuses; an `import()` inside a
 * Function body is invisible to the compiler and stays a real one, compiled or not.
 */
// eslint-disable-next-line @typescript-eslint/no-implied-eval -- a constant body, no input: the only way to keep import() from SWC
const importModule = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;
const extTasks = () =>
  importModule('@modelcontextprotocol/ext-tasks/client') as Promise<
    typeof import('@modelcontextprotocol/ext-tasks/client')
  >;

/** The value `Mcp-Name` mirrors for a request (SEP-2243 and SEP-2663's Streamable HTTP binding). */
function mcpName(method: string, params: Record<string, unknown> | undefined): string | undefined {
  const field = method === 'tools/call' ? 'name' : method.startsWith('tasks/') ? 'taskId' : undefined;
  const value = field ? params?.[field] : undefined;
  return typeof value === 'string' ? value : undefined;
}

let nextId = 1;

/**
 * The host's raw dispatch that ext-tasks requires for 2026-07-28 task traffic (the SDK Client's
 * codecs reject it): one JSON-RPC request POSTed to /mcp with the bearer token and the standard
 * headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name), answered from a JSON or an SSE body.
 */
export function rawDispatch(baseUrl: string, token: string): RawClientDispatch {
  return async (request, options) => {
    const { method, params } = request as { method: string; params?: Record<string, unknown> };
    const extra = options?.context?.headers ?? {};
    const headers = {
      ...revision2026Headers(method, mcpName(method, params)),
      ...Object.fromEntries(Object.entries(extra).map(([k, v]) => [k.toLowerCase(), v])),
    };
    const { json, status, text } = await rawMcp(
      baseUrl,
      token,
      { jsonrpc: '2.0', id: nextId++, method, params },
      headers,
    );
    if (!json || typeof json !== 'object') throw new Error(`${method}: HTTP ${status} without JSON-RPC: ${text}`);
    return json.error ? { kind: 'error', error: json.error } : { kind: 'result', result: json.result };
  };
}

/**
 * A task-enabled session of the official Tasks client (`createTaskSessionFromClient`) over the v2
 * SDK client pinned to 2026-07-28: the client discovers the extension, ext-tasks frames each
 * request's `_meta` (revision, client info, capabilities with the extension) and sends task traffic
 * through `rawDispatch`.
 */
export async function connectTaskSession(
  baseUrl: string,
  token: string,
): Promise<{ client: Client; session: TaskEnabledSession }> {
  const { createTaskSessionFromClient } = await extTasks();
  const client = await connectMcp2026(baseUrl, token, { capabilities: TASKS_CAPABILITIES });
  // The same Client: ext-tasks (ESM) names the ESM build's declaration of it, these tests the CommonJS one's.
  const session = createTaskSessionFromClient(client as unknown as Parameters<typeof createTaskSessionFromClient>[0], {
    endpointId: `alcarta-tests:${baseUrl}`,
    rawDispatch: rawDispatch(baseUrl, token),
    v2RequestFraming: {
      protocolVersion: MODERN,
      clientInfo: { name: 'alcarta-tests-2026-tasks', version: '1.0.0' },
      clientCapabilities: TASKS_CAPABILITIES,
    },
  });
  return { client, session };
}

/**
 * A raw 2026-07-28 request with the standard headers (Mcp-Name from the body, unless `name` says
 * otherwise), declaring the Tasks extension unless `capabilities` says otherwise.
 */
export function raw2026(
  baseUrl: string,
  token: string,
  method: string,
  params: Record<string, unknown>,
  options: { capabilities?: Record<string, unknown>; name?: string } = {},
): ReturnType<typeof rawMcp> {
  return rawMcp(
    baseUrl,
    token,
    {
      jsonrpc: '2.0',
      id: nextId++,
      method,
      params: { ...params, _meta: envelope(options.capabilities ?? TASKS_CAPABILITIES) },
    },
    revision2026Headers(method, options.name ?? mcpName(method, params)),
  );
}

/** Starts `monitor_inbox` on `mailboxId` as a task of the extension (raw 2026-07-28): its CreateTaskResult. */
export async function startInboxTask(baseUrl: string, token: string, mailboxId: string): Promise<Record<string, any>> {
  const res = await raw2026(baseUrl, token, 'tools/call', {
    name: 'monitor_inbox',
    arguments: { mailbox_id: mailboxId, timeout_seconds: 300 },
  });
  assert.equal(res.json.result?.resultType, 'task', JSON.stringify(res.json));
  return res.json.result as Record<string, any>;
}
