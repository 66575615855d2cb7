import { Injectable } from '@nestjs/common';
import { CallToolRequestSchema, ErrorCode, JSONRPCRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolRequest, JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { Request, Response } from 'express';
import { Caller } from '../auth/caller';
import { AppConfig } from '../config/app-config';
import { stringifyOnce } from '../common/json-once';
import { CallCancellations } from './call-cancellations';
import { jsonRpcError } from './json-rpc';
import { progressNotifier } from './progress';
import { ProtocolRevision, TASKS_REVISION } from './protocol-revision';
import { ToolCatalog } from './tool-catalog';

/** The headers the SDK's Streamable HTTP transport sends with an SSE response. */
const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache, no-transform',
  Connection: 'keep-alive',
  'X-Accel-Buffering': 'no',
};

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
 */
@Injectable()
export class BlockingCallResponder {
  constructor(
    private readonly catalog: ToolCatalog,
    private readonly config: AppConfig,
    private readonly cancellations: CallCancellations,
  ) {}

  /** The request, if it is a plain call of a blocking tool this caller may use. */
  match(req: Request, caller: Caller, revision: ProtocolRevision): (CallToolRequest & { id: RequestId }) | undefined {
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

  async respond(
    call: CallToolRequest & { id: RequestId },
    caller: Caller,
    revision: ProtocolRevision,
    res: Response,
  ): Promise<void> {
    const abort = new AbortController();
    let cancelled = false;
    let answered = false;
    const send = (message: JSONRPCMessage) => {
      if (!cancelled && !res.writableEnded) res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    };
    const untrack = this.cancellations.track(caller.tokenId, call.id, () => {
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
      response = `{"jsonrpc":"2.0","id":${JSON.stringify(call.id)},"result":${stringifyOnce(result)}}`;
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
