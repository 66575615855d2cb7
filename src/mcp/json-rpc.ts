import type { RequestId } from '@modelcontextprotocol/sdk/types.js';

/**
 * The implementation-defined server error of JSON-RPC 2.0 (-32000 to -32099 are reserved for it),
 * used for HTTP-level refusals of /mcp (an unsupported revision, a wrong method, overload), as the
 * SDK's transport does.
 */
export const SERVER_ERROR = -32000;

/** `id` is null when the request's id could not be read (an unparsable body, a refusal before parsing). */
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
