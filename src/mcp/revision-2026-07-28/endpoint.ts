import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { createMcpHandler, ProtocolErrorCode } from '@modelcontextprotocol/server';
import type {
  AuthInfo,
  McpHttpHandler,
  McpRequestContext,
  PerRequestResponseMode,
  RequestId,
} from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { NodeMcpRequestHandler } from '@modelcontextprotocol/node';
import { Request, Response } from 'express';
import { Caller } from '../../kernel/caller';
import { AppConfig } from '../../config/app-config';
import { BlockingCallResponder } from '../blocking-call.responder';
import { REVISION_2026_07_28 } from '../protocol-revision';
import { ToolCatalog } from '../tool-catalog';
import { jsonRpcError, JsonRpcErrorResponse } from '../../kernel/json-rpc';
import { clientCapabilities, declaresExtension, Revision20260728Extension, requiredExtension } from './extension';
import { Revision20260728ServerFactory } from './server.factory';
import { REVISION_2026_07_28_EXTENSIONS } from './tool-calls';
import { TaskSubscriptions } from './task-subscriptions';

/** How the caller reaches the per-request server factory: the v2 SDK passes `authInfo` through. */
interface CallerAuthInfo extends AuthInfo {
  extra: { caller: Caller };
}

/**
 * Serves POST /mcp requests of the 2026-07-28 era with the v2 SDK's `createMcpHandler`, in strict
 * `modern` mode: the endpoint routes 2025-era requests to SDK 1.x before they get here. Calls of the
 * blocking tools (the waits) are answered over SSE from the start, so `: keepalive` comments keep
 * proxies from closing a quiet wait; every other request gets a plain JSON body unless it sends
 * progress first. A plain call of a blocking tool that the SDK would serve as it is skips the
 * SDK's per-request objects (BlockingCallResponder): a parked wait then weighs no more than at
 * 2025-11-25 (29.8 against 30.6 KiB, README Benchmarks). A `subscriptions/listen` for task status
 * (Tasks extension) is served by TaskSubscriptions, the SDK's listen router knowing only the core
 * filter; everything else, refusals included, is the SDK's.
 */
@Injectable()
export class Revision20260728Endpoint implements OnModuleDestroy {
  private readonly logger = new Logger(Revision20260728Endpoint.name);
  private readonly handlers: McpHttpHandler[] = [];
  private readonly plain: NodeMcpRequestHandler;
  private readonly streamed: NodeMcpRequestHandler;

  constructor(
    private readonly servers: Revision20260728ServerFactory,
    private readonly catalog: ToolCatalog,
    private readonly config: AppConfig,
    @Inject(REVISION_2026_07_28_EXTENSIONS) private readonly extensions: Revision20260728Extension[],
    private readonly blockingCalls: BlockingCallResponder,
    private readonly taskSubscriptions: TaskSubscriptions,
  ) {
    this.plain = this.handler('auto');
    this.streamed = this.handler('sse');
  }

  async handle(caller: Caller, req: Request, res: Response): Promise<void> {
    const refusal = this.undeclaredListen(req.body);
    if (refusal) {
      res.status(200).json(refusal);
      return;
    }
    const taskListen = this.taskSubscriptions.match(req);
    if (taskListen) return this.taskSubscriptions.serve(taskListen, caller, res);
    const blockingCall = this.blockingCalls.matchRevision20260728(req, caller);
    if (blockingCall) return this.blockingCalls.respond(blockingCall, caller, REVISION_2026_07_28, res);
    const auth: CallerAuthInfo = { token: '', clientId: caller.tokenId, scopes: [...caller.scopes], extra: { caller } };
    (req as Request & { auth?: AuthInfo }).auth = auth;
    const handler = this.isBlockingCall(req.body, caller) ? this.streamed : this.plain;
    await handler(req, res, req.body);
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.handlers.map((h) => h.close()));
  }

  private handler(responseMode: PerRequestResponseMode): NodeMcpRequestHandler {
    const handler = createMcpHandler((ctx: McpRequestContext) => this.servers.create(callerOf(ctx)), {
      legacy: 'reject',
      responseMode,
      keepAliveMs: this.config.keepaliveMs,
      // Rejections of client mistakes are answered to the client; only the endpoint's own failures are news.
      onerror: (err) => this.logger.debug(`2026-07-28 request not served: ${err.message}`),
    });
    this.handlers.push(handler);
    return toNodeHandler(handler, { onerror: (err) => this.logger.error(err) });
  }

  /**
   * A `subscriptions/listen` asking for an extension's notifications without declaring the
   * extension on the request: the -32021 answer (the SDK's listen router would acknowledge it, and
   * TaskSubscriptions serves only declared listens).
   */
  private undeclaredListen(body: unknown): JsonRpcErrorResponse | undefined {
    const listen = body as { method?: unknown; id?: RequestId; params?: { notifications?: unknown; _meta?: object } };
    const notifications = listen?.method === 'subscriptions/listen' ? listen.params?.notifications : undefined;
    if (!notifications || typeof notifications !== 'object') return undefined;
    const capabilities = clientCapabilities(listen.params?._meta);
    const missing = this.extensions.find(
      (e) =>
        e.enabled &&
        e.listenNeedsDeclaration?.(notifications as Record<string, unknown>) &&
        !declaresExtension(capabilities, e.id),
    );
    return missing
      ? jsonRpcError(
          listen.id ?? null,
          ProtocolErrorCode.MissingRequiredClientCapability,
          `Missing required client capability: the ${missing.id} extension`,
          requiredExtension(missing.id),
        )
      : undefined;
  }

  private isBlockingCall(body: unknown, caller: Caller): boolean {
    const call = body as { method?: unknown; params?: { name?: unknown } } | null;
    return call?.method === 'tools/call' && typeof call.params?.name === 'string'
      ? this.catalog.isBlocking(call.params.name, caller)
      : false;
  }
}

function callerOf(ctx: McpRequestContext): Caller {
  const caller = (ctx.authInfo as CallerAuthInfo | undefined)?.extra?.caller;
  // The endpoint always passes one: a request without it never reaches the factory.
  if (!caller) throw new Error('2026-07-28 request without a caller');
  return caller;
}
