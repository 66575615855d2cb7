import { Injectable } from '@nestjs/common';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Request, Response } from 'express';
import { Caller } from '../auth/caller';
import { AppConfig } from '../config/app-config';
import { BlockingCallResponder } from './blocking-call.responder';
import { McpServerFactory } from './mcp-server.factory';
import { ProtocolRevision, revisionOf, SUPPORTED_REVISIONS } from './protocol-revision';
import { TASKS_REVISION } from './tool-catalog';

/**
 * Serves one POST /mcp over Streamable HTTP in stateless mode: a fresh server and transport per
 * request, closed when the response ends. The body was parsed (and size-limited) by the HTTP layer.
 */
@Injectable()
export class McpEndpoint {
  constructor(
    private readonly servers: McpServerFactory,
    private readonly blockingCalls: BlockingCallResponder,
    private readonly config: AppConfig,
  ) {}

  async handle(caller: Caller, req: Request, res: Response): Promise<void> {
    const revision = revisionOf(req.body, req.headers['mcp-protocol-version']);
    if (!revision) {
      res.status(400).json({
        jsonrpc: '2.0',
        id: null,
        error: {
          code: -32000,
          message: `Bad Request: Unsupported protocol version (supported versions: ${SUPPORTED_REVISIONS.join(', ')})`,
        },
      });
      return;
    }
    dropTaskBeforeTasksRevision(req.body, revision);
    const blockingCall = this.blockingCalls.match(req, caller, revision);
    if (blockingCall) return this.blockingCalls.respond(blockingCall, caller, revision, res);

    const server = this.servers.create(caller, revision);
    // Responses are SSE streams with a comment every keep-alive interval, so no proxy sees an idle
    // connection during a blocking wait.
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      keepAliveMs: this.config.keepaliveMs,
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  }
}

/**
 * Before 2025-11-25 there are no tasks: a `task` member of `tools/call` params is ignored and the
 * call runs normally (SPEC §5). The SDK would answer it with an error instead, so it goes first.
 */
function dropTaskBeforeTasksRevision(body: unknown, revision: ProtocolRevision): void {
  if (revision === TASKS_REVISION) return;
  for (const message of Array.isArray(body) ? body : [body]) {
    const call = message as { method?: unknown; params?: { task?: unknown } } | null;
    if (call?.method === 'tools/call' && call.params && typeof call.params === 'object') delete call.params.task;
  }
}
