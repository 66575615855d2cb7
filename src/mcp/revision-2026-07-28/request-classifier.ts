import { Injectable } from '@nestjs/common';
import { classifyInboundRequest, isJsonContentType, PROTOCOL_VERSION_META_KEY } from '@modelcontextprotocol/server';
import type { JSONRPCRequest } from '@modelcontextprotocol/server';
import { Request } from 'express';
import { REVISION_2026_07_28 } from '../protocol-revision';

/** Distinct envelopes remembered; a client sends the same one on every call, so few are in use. */
const MAX_ENVELOPES = 1000;
/** An envelope longer than this (as JSON) is checked on every request instead of remembered. */
const MAX_ENVELOPE_JSON = 8 * 1024;
const JSON_RPC_REQUEST_KEYS = new Set(['jsonrpc', 'id', 'method', 'params']);

/**
 * Answers, for the requests Alcarta serves beside the v2 SDK (the blocking calls, task
 * subscriptions), what the SDK's inbound classification (`classifyInboundRequest`) answers: that a
 * POST is a JSON-RPC request of the 2026-07-28 era with nothing to refuse (envelope, revision,
 * `MCP-Protocol-Version` and `Mcp-Method` agreeing with the body).
 *
 * Running the SDK's classification on every call costs about 9 KiB of short-lived objects (its zod
 * checks, two of them failing by design), three times what SDK 1.x's schemas cost a 2025-11-25 call;
 * with thousands of waits opened at once that garbage alone made a parked 2026-07-28 wait weigh
 * more than a 2025 one. So the common case is decided here with plain checks that restate the
 * SDK's rules, and the one part that is not plain, the `_meta` envelope's schema, is asked of the
 * SDK once per distinct envelope (without the per-call `progressToken`) and remembered: a client
 * sends the same envelope on every call. A request the plain checks do not accept still goes
 * through the SDK's classification, so an unusual request is judged exactly as the SDK judges it.
 * A unit test holds the plain checks to the SDK's answers.
 */
@Injectable()
export class Revision20260728RequestClassifier {
  private readonly envelopes = new Map<string, boolean>();

  /** The request in `req` if it is a `method` request the v2 SDK would route to 2026-07-28. */
  request(req: Request, method: string): JSONRPCRequest | undefined {
    const body = req.body as Record<string, unknown> | null | undefined;
    if (!isPlainObject(body) || body.method !== method) return undefined;
    if (req.method !== 'POST' || !isJsonContentType(req.headers['content-type'])) return undefined;
    const protocolVersionHeader = singleHeader(req.headers['mcp-protocol-version']);
    const mcpMethodHeader = singleHeader(req.headers['mcp-method']);
    if (protocolVersionHeader === undefined || mcpMethodHeader === undefined) return undefined;
    if (this.isPlainRevision20260728Request(body, withoutOws(protocolVersionHeader), withoutOws(mcpMethodHeader))) {
      return body as unknown as JSONRPCRequest;
    }
    const route = classifyInboundRequest({
      httpMethod: req.method,
      protocolVersionHeader,
      mcpMethodHeader,
      mcpNameHeader: singleHeader(req.headers['mcp-name']),
      body,
    });
    if (route.kind !== 'modern' || route.messageKind !== 'request') return undefined;
    if (route.classification.revision !== REVISION_2026_07_28) return undefined;
    return route.message.method === method ? route.message : undefined;
  }

  /**
   * The SDK's rules for a request of its `modern` era, restated (a request that fails one is left to the SDK):
   * a JSON-RPC request with no other member (`id` a string or a safe integer, the SDK's
   * RequestId), params with a `_meta` envelope claiming 2026-07-28, the headers naming the same
   * revision and method, a `progressToken` that is a string or a safe integer, and an envelope the
   * SDK accepts.
   */
  isPlainRevision20260728Request(body: Record<string, unknown>, protocolVersion: string, mcpMethod: string): boolean {
    for (const key in body) if (!JSON_RPC_REQUEST_KEYS.has(key)) return false;
    if (body.jsonrpc !== '2.0' || !isRequestId(body.id) || typeof body.method !== 'string') return false;
    if (protocolVersion !== REVISION_2026_07_28 || mcpMethod !== body.method) return false;
    const params = body.params;
    if (!isPlainObject(params) || !isPlainObject(params._meta)) return false;
    const { progressToken, ...envelope } = params._meta;
    if (progressToken !== undefined && !isRequestId(progressToken)) return false;
    return envelope[PROTOCOL_VERSION_META_KEY] === REVISION_2026_07_28 && this.acceptsEnvelope(envelope);
  }

  private acceptsEnvelope(envelope: Record<string, unknown>): boolean {
    const key = JSON.stringify(envelope);
    const known = this.envelopes.get(key);
    if (known !== undefined) return known;
    const route = classifyInboundRequest({
      httpMethod: 'POST',
      protocolVersionHeader: REVISION_2026_07_28,
      mcpMethodHeader: 'ping',
      body: { jsonrpc: '2.0', id: 0, method: 'ping', params: { _meta: envelope } },
    });
    const accepted = route.kind === 'modern' && route.messageKind === 'request';
    if (key.length <= MAX_ENVELOPE_JSON) {
      // Forgetting them all at once keeps this simple; a replica sees few distinct envelopes.
      if (this.envelopes.size >= MAX_ENVELOPES) this.envelopes.clear();
      this.envelopes.set(key, accepted);
    }
    return accepted;
  }
}

/** A header value without the optional whitespace (SP, HTAB) around it, as the v2 SDK compares it. */
export function withoutOws(value: string): string {
  return value.replace(/^[ \t]+|[ \t]+$/g, '');
}

/** A header's value, or undefined when absent (Node joins repeated custom headers into one string). */
export function singleHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The SDK's RequestId (and ProgressToken): a string, or an integer a double holds exactly. */
function isRequestId(value: unknown): boolean {
  return typeof value === 'string' || Number.isSafeInteger(value);
}
