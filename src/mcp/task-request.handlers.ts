import { Injectable } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CancelTaskRequestSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  McpError,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { Caller } from '../kernel/caller';
import { AppConfig } from '../config/app-config';
import { clientFacingError } from '../database/database-errors';
import { TaskService } from '../tasks/task.service';
import { protocolErrorOf } from '../kernel/json-rpc';
import { progressNotifier, withProgress } from './progress';

/**
 * `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` (MCP 2025-11-25) for one request's
 * server, bound to the caller's token. They replace the SDK's own handlers: those need an
 * in-process task store keyed by session (there is none when stateless) and `tasks/result` would
 * poll; ours reads PostgreSQL and blocks on the wait engine, with progress when asked.
 */
@Injectable()
export class TaskRequestHandlers {
  constructor(
    private readonly tasks: TaskService,
    private readonly config: AppConfig,
  ) {}

  register(server: Server, caller: Caller): void {
    server.setRequestHandler(GetTaskRequestSchema, (request) =>
      protocolErrors(() => this.tasks.get(caller, request.params.taskId)),
    );
    server.setRequestHandler(ListTasksRequestSchema, (request) =>
      protocolErrors(() => this.tasks.list(caller, request.params?.cursor)),
    );
    server.setRequestHandler(CancelTaskRequestSchema, (request) =>
      protocolErrors(() => this.tasks.cancel(caller, request.params.taskId)),
    );
    server.setRequestHandler(GetTaskPayloadRequestSchema, (request, extra) =>
      protocolErrors(async () => {
        const { taskId } = request.params;
        const progress = progressNotifier(request.params._meta?.progressToken, (notification) =>
          extra.sendNotification(notification),
        );
        const result = await withProgress(
          progress,
          this.config.keepaliveMs,
          this.tasks.result(caller, taskId, extra.signal),
        );
        const meta = (result._meta as Record<string, unknown> | undefined) ?? {};
        return { ...result, _meta: { ...meta, [RELATED_TASK_META_KEY]: { taskId } } };
      }),
    );
  }
}

/**
 * Task operations report problems as JSON-RPC errors (MCP 2025-11-25 "Error Handling"): an unknown
 * task (or another token's), a bad cursor, cancelling a finished task → -32602; the database
 * unreachable or the replica shutting down → -32000 (protocolErrorOf).
 */
async function protocolErrors<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const known = clientFacingError(err);
    if (!known) throw err;
    const { code, message, data } = protocolErrorOf(known);
    throw new McpError(code, message, data);
  }
}
