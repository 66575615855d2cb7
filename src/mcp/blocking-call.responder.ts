import { Injectable } from '@nestjs/common';
import { CallToolRequestSchema, ErrorCode, JSONRPCRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolRequest, JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { isSpecType, SERVER_INFO_META_KEY } from '@modelcontextprotocol/server';
import { Request, Response } from 'express';
import { Caller } from '../kernel/caller';
import { AppConfig } from '../config/app-config';
import { stringifyOnce } from '../common/json-once';
import { CallCancellations } from './call-cancellations';
import { jsonRpcError } from '../kernel/json-rpc';
import { progressNotifier } from './progress';
import { clientCapabilities, declaresExtension } from './revision-2026-07-28/extension';
import { Revision20260728RequestClassifier, singleHeader, withoutOws } from './revision-2026-07-28/request-classifier';
import { TASKS_EXTENSION_ID } from './revision-2026-07-28/tasks-extension';
import { REVISION_2026_07_28, ProtocolRevision, TASKS_REVISION } from './protocol-revision';
import { SERVER_INFO } from './server-identity';
import { ToolCatalog } from './tool-catalog';

/** The headers the SDK's Streamable HTTP transport sends with an SSE response. */
export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache, no-transform',
  Connection: 'keep-alive',
  'X-Accel-Buffering': 'no',
};

/** A plain call of a blocking tool, as the endpoint hands it over once `match`ed. */
export type BlockingCall = CallToolRequest & { id: RequestId };

/**
 * Client capabilities that make a 2026-07-28 `tools/call` something else than a blocking call: with
 * the Tasks extension declared, the call may return a task at once (Revision20260728ToolCalls), so it goes
 * through the v2 SDK.
 */
const CALL_CHANGING_EXTENSIONS = [TASKS_EXTENSION_ID];

/** `_meta['io.modelcontextprotocol/serverInfo']` as the v2 SDK stamps it on every 2026-07-28 result. */
const SERVER_INFO_META_JSON = `{${JSON.stringify(SERVER_INFO_META_KEY)}:${JSON.stringify(SERVER_INFO)}}`;

/**
 * Serves plain (non-task) `tools/call` requests of blocking tools — the waits — without building
 * the SDK's per-request server and transport. A parked wait can last minutes to hours, and the SDK
 * object graph (server, transport, web-stream adapters) weighs more than 70 KiB per request; what a
 * parked call really needs is its socket, a registry entry and a deadline. This path is exactly one
 * JSON-RPC request answered by one SSE stream, the simplest case of Streamable HTTP: the message is
 * validated with the SDK's own schemas, the stream carries `: keepalive` comments and, when asked,
 * `notifications/progress`, then the JSON-RPC response, framed as the SDK frames it. A
 * `notifications/cancelled` for the call (on any replica) ends the wait and the stream without a
 * response. Everything else (initialize, tools/list, other tools, task-augmented calls, batches)
 * goes through the SDK.
 *
 * Both eras have this path, each framed as its SDK frames it: `match` takes 2025-era calls (SDK
 * 1.x's schemas, its result shape), `matchRevision20260728` takes 2026-07-28 calls that the v2 SDK's own
 * inbound classification routes to its `modern` era with nothing to reject (envelope, revision,
 * headers), and their results carry `resultType` and the server's identity in `_meta`, as the v2
 * SDK writes them. At 2026-07-28 the client ends a call by closing its connection; there is no
 * `notifications/cancelled` to honour.
 */
@Injectable()
export class BlockingCallResponder {
  constructor(
    private readonly catalog: ToolCatalog,
    private readonly config: AppConfig,
    private readonly cancellations: CallCancellations,
    private readonly revision20260728Requests: Revision20260728RequestClassifier,
  ) {}

  /** The request, if it is a plain call of a blocking tool this caller may use. */
  match(req: Request, caller: Caller, revision: ProtocolRevision): BlockingCall | undefined {
    const accept = req.headers.accept ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
    const message = JSONRPCRequestSchema.safeParse(req.body);
    if (!message.success || message.data.method !== 'tools/call') return undefined;
    const call = CallToolRequestSchema.safeParse(req.body);
    if (!call.success || !this.catalog.isBlocking(call.data.params.name, caller)) return undefined;
    // Task-augmented calls return at once (CreateTaskResult); at older revisions `task` is ignored.
    if (call.data.params.task !== undefined && revision === TASKS_REVISION) return undefined;
    return { ...call.data, id: message.data.id };
  }

  /**
   * The 2026-07-28 request, if it is a plain call of a blocking tool this caller may use and the v2
   * SDK would serve it with nothing to refuse: its inbound classification routes it to its `modern`
   * era at this revision (Revision20260728RequestClassifier), the standard headers are all there and agree
   * with the body (the classification checks what is present; presence is checked here, the
   * decoding of an encoded `Mcp-Name` left to the SDK), and the params are a CallToolRequest by its
   * schema. Anything else, rejections included, is left to the v2 SDK.
   */
  matchRevision20260728(req: Request, caller: Caller): BlockingCall | undefined {
    const accept = req.headers.accept ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
    const mcpNameHeader = singleHeader(req.headers['mcp-name']);
    if (mcpNameHeader === undefined) return undefined;
    const message = this.revision20260728Requests.request(req, 'tools/call');
    if (!message || !isSpecType.CallToolRequest(message)) return undefined;
    const { name, _meta: meta } = message.params;
    if (withoutOws(mcpNameHeader) !== name || !this.catalog.isBlocking(name, caller)) return undefined;
    const capabilities = clientCapabilities(meta);
    if (CALL_CHANGING_EXTENSIONS.some((id) => declaresExtension(capabilities, id))) return undefined;
    return { ...(message as unknown as CallToolRequest), id: message.id };
  }

  /** Answers `call` at `revision`, framed as that era's SDK frames it. */
  async respond(call: BlockingCall, caller: Caller, revision: ProtocolRevision, res: Response): Promise<void> {
    const isRevision20260728 = revision === REVISION_2026_07_28;
    const abort = new AbortController();
    let cancelled = false;
    let answered = false;
    const send = (message: JSONRPCMessage) => {
      if (!cancelled && !res.writableEnded) res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    };
    const untrack = isRevision20260728
      ? () => undefined
      : this.cancellations.track(caller.tokenId, call.id, () => {
          cancelled = true;
          abort.abort();
        });
    // The client going away ends the wait. Once the call is answered its closing is normal and
    // aborts nothing: an abort builds a DOMException, which thousands of answers at once feel.
    // (The listener stays: removing it costs more than the check, and the response goes soon.)
    res.on('close', () => {
      if (!answered) abort.abort();
    });
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();
    const keepalive = setInterval(() => {
      if (!res.writableEnded) res.write(': keepalive\n\n');
    }, this.config.keepaliveMs);

    let response: string;
    try {
      const result = await this.catalog.call(call.params.name, call.params.arguments, {
        caller,
        revision,
        signal: abort.signal,
        progress: progressNotifier(call.params._meta?.progressToken, (notification) => {
          send({ jsonrpc: '2.0', ...notification });
          return Promise.resolve();
        }),
      });
      // JSON.stringify({ jsonrpc, id, result }), with a result shared by many calls serialised once.
      const resultJson = isRevision20260728 ? revision20260728ResultJson(result) : stringifyOnce(result);
      response = `{"jsonrpc":"2.0","id":${JSON.stringify(call.id)},"result":${resultJson}}`;
    } catch (err) {
      const error = err instanceof McpError ? err : new McpError(ErrorCode.InternalError, 'Internal error');
      response = JSON.stringify(jsonRpcError(call.id, error.code, error.message, error.data));
    } finally {
      answered = true;
      untrack();
      clearInterval(keepalive);
    }
    // The response and the end of the stream in one write.
    if (cancelled || res.writableEnded) res.end();
    else res.end(`event: message\ndata: ${response}\n\n`);
  }
}

/**
 * A tool result as the v2 SDK answers it at 2026-07-28: `resultType: "complete"` and the server's
 * identity in `_meta['io.modelcontextprotocol/serverInfo']` added (tools/call results carry no cache
 * fields). The catalog's results have neither, so both are appended to the JSON shared by every call
 * woken with that result, which keeps it serialised once.
 */
function revision20260728ResultJson(result: object): string {
  if ('resultType' in result || '_meta' in result) {
    const meta = (result as { _meta?: Record<string, unknown> })._meta;
    return JSON.stringify({
      resultType: 'complete',
      ...result,
      _meta: { [SERVER_INFO_META_KEY]: SERVER_INFO, ...meta },
    });
  }
  const json = stringifyOnce(result);
  const members = json === '{}' ? '' : `${json.slice(1, -1)},`;
  return `{${members}"resultType":"complete","_meta":${SERVER_INFO_META_JSON}}`;
}
