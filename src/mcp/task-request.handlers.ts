import { Injectable } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CancelTaskRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  McpError,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { Caller } from '../auth/caller';
import { AlcartaError } from '../common/errors';
import { AppConfig } from '../config/app-config';
import { TaskService } from '../tasks/task.service';
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
 * task (or another token's), a bad cursor, cancelling a finished task → -32602.
 */
async function protocolErrors<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof AlcartaError) {
      const code = err.code === 'unavailable' ? ErrorCode.InternalError : ErrorCode.InvalidParams;
      throw new McpError(code, err.message, err.toBody());
    }
    throw err;
  }
}
