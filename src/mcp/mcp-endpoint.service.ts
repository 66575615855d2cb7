import { Injectable } from '@nestjs/common';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CancelledNotificationSchema,
  ErrorCode,
  isJSONRPCRequest,
  JSONRPCRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { Request, Response } from 'express';
import { Caller } from '../kernel/caller';
import { AppConfig } from '../config/app-config';
import { BlockingCallResponder } from './blocking-call.responder';
import { CallCancellations } from './call-cancellations';
import { McpServerFactory } from './mcp-server.factory';
import { jsonRpcError, refusalOf, SERVER_ERROR } from '../kernel/json-rpc';
import { Revision20260728Endpoint } from './revision-2026-07-28/endpoint';
import {
  isRevision20260728Request,
  ProtocolRevision,
  revisionOf,
  SUPPORTED_REVISIONS,
  TASKS_REVISION,
} from './protocol-revision';
import { invalidParams } from './request-params';

/**
 * Serves one POST /mcp over Streamable HTTP in stateless mode: a fresh server and transport per
 * request, closed when the response ends. The body was parsed (and size-limited) by the HTTP layer.
 * Requests of the 2026-07-28 era go to the v2 SDK (Revision20260728Endpoint); the rest are served by SDK
 * 1.x exactly as before.
 */
@Injectable()
export class McpEndpoint {
  constructor(
    private readonly servers: McpServerFactory,
    private readonly blockingCalls: BlockingCallResponder,
    private readonly cancellations: CallCancellations,
    private readonly config: AppConfig,
    private readonly revision20260728: Revision20260728Endpoint,
  ) {}

  async handle(caller: Caller, req: Request, res: Response): Promise<void> {
    if (isRevision20260728Request(req.body, req.headers['mcp-protocol-version']))
      return this.revision20260728.handle(caller, req, res);
    const revision = revisionOf(req.body, req.headers['mcp-protocol-version']);
    if (!revision) {
      res
        .status(400)
        .json(
          refusalOf(
            req.body,
            SERVER_ERROR,
            `Bad Request: Unsupported protocol version (supported versions: ${SUPPORTED_REVISIONS.join(', ')})`,
          ),
        );
      return;
    }
    dropTaskBeforeTasksRevision(req.body, revision);
    await this.announceCancellations(caller, req.body);
    const blockingCall = this.blockingCalls.match(req, caller, revision);
    if (blockingCall) return this.blockingCalls.respond(blockingCall, caller, revision, res);

    const server = this.servers.create(caller, revision);
    // Responses are SSE streams with a comment every keep-alive interval, so no proxy sees an idle
    // connection during a blocking wait.
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      keepAliveMs: this.config.keepaliveMs,
    });
    // A cancelled request (tasks/result, say) ends its response: closing the transport aborts its
    // handler, which then sends nothing (MCP wants no response to a cancelled request).
    const untrack = requestIds(req.body).map((id) =>
      this.cancellations.track(caller.tokenId, id, () => void transport.close()),
    );
    res.on('close', () => {
      for (const u of untrack) u();
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    answerInvalidParams(transport, revision);
    await transport.handleRequest(req, res, req.body);
  }

  /** `notifications/cancelled` in the body: the request may be parked on any replica. */
  private async announceCancellations(caller: Caller, body: unknown): Promise<void> {
    for (const message of Array.isArray(body) ? body : [body]) {
      const cancelled = CancelledNotificationSchema.safeParse(message);
      const id = cancelled.success ? cancelled.data.params.requestId : undefined;
      if (id !== undefined) await this.cancellations.announce(caller.tokenId, id);
    }
  }
}

/**
 * Requests whose params fail the SDK's schema get -32602 with a short message before the SDK sees
 * them (it would answer -32603 with a validator dump); the rest go on to the server as usual. Works
 * per message, so one bad request in a batch does not spoil the others.
 */
function answerInvalidParams(transport: StreamableHTTPServerTransport, revision: ProtocolRevision): void {
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const problem = isJSONRPCRequest(message) ? invalidParams(message, revision) : undefined;
    if (problem === undefined || !isJSONRPCRequest(message)) return deliver?.(message, extra);
    void transport.send(jsonRpcError(message.id, ErrorCode.InvalidParams, problem)).catch(() => undefined);
  };
}

function requestIds(body: unknown): (string | number)[] {
  return (Array.isArray(body) ? body : [body]).flatMap((message) => {
    const request = JSONRPCRequestSchema.safeParse(message);
    return request.success ? [request.data.id] : [];
  });
}

/**
 * Before 2025-11-25 there are no tasks: a `task` member of `tools/call` params is ignored and the
 * call runs normally (docs/agents.md, "Tasks"). The SDK would answer it with an error instead, so it goes first.
 */
function dropTaskBeforeTasksRevision(body: unknown, revision: ProtocolRevision): void {
  if (revision === TASKS_REVISION) return;
  for (const message of Array.isArray(body) ? body : [body]) {
    const call = message as { method?: unknown; params?: { task?: unknown } } | null;
    if (call?.method === 'tools/call' && call.params && typeof call.params === 'object') delete call.params.task;
  }
}
