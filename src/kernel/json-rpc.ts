import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import { AlcartaError } from './errors';

/**
 * The implementation-defined server error of JSON-RPC 2.0 (-32000 to -32099 are reserved for it),
 * used for HTTP-level refusals of /mcp (an unsupported revision, a wrong method, overload, an
 * unreachable database), as the SDK's transport does.
 */
export const SERVER_ERROR = -32000;

/** The endpoint's path; Express also routes it with other letter cases and a trailing slash. */
const MCP_PATH = '/mcp';

/** Whether `path` is the MCP endpoint, as Express routes it: its refusals are JSON-RPC error bodies. */
export function isMcpPath(path: string): boolean {
  return path.toLowerCase().replace(/\/+$/, '') === MCP_PATH;
}

/** `id` is null when the request's id could not be read (an unparsable body, a batch, a notification). */
export interface JsonRpcErrorResponse<Id extends RequestId | null = RequestId | null> {
  jsonrpc: '2.0';
  id: Id;
  error: { code: number; message: string; data?: unknown };
}

/** A JSON-RPC error response: every error object this server builds outside the SDK. */
export function jsonRpcError<Id extends RequestId | null>(
  id: Id,
  code: number,
  message: string,
  data?: unknown,
): JsonRpcErrorResponse<Id> {
  return { jsonrpc: '2.0', id, error: data === undefined ? { code, message } : { code, message, data } };
}

/**
 * The id of the one JSON-RPC request in a parsed /mcp body, or null: a batch (no single id), a
 * notification or response, anything that is not a request.
 */
export function requestIdOf(body: unknown): RequestId | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const { method, id } = body as { method?: unknown; id?: unknown };
  if (typeof method !== 'string') return null;
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

/**
 * The JSON-RPC error that answers an HTTP-level refusal of a /mcp request (a 503, 429, 413, 400…):
 * it carries the request's id whenever the body was parsed and is one request, so a client can
 * match it to the call it made. Every such refusal is built here.
 */
export function refusalOf(body: unknown, code: number, message: string, data?: unknown): JsonRpcErrorResponse {
  return jsonRpcError(requestIdOf(body), code, message, data);
}

/**
 * An AlcartaError where the protocol answers with a JSON-RPC error instead of a tool result (task
 * operations, a task-augmented call that could not create its task): `unavailable` (the database,
 * a replica shutting down) is the server error -32000, as in the body of an HTTP 503, never
 * -32603; anything else is a mistake in the request's params, -32602. `data` is Alcarta's error body.
 */
export function protocolErrorOf(err: AlcartaError): { code: number; message: string; data: Record<string, unknown> } {
  const code = err.code === 'unavailable' ? SERVER_ERROR : ErrorCode.InvalidParams;
  return { code, message: err.message, data: err.toBody() };
}
