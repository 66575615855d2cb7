import { Injectable } from '@nestjs/common';
import { MissingRequiredClientCapabilityError, ProtocolError } from '@modelcontextprotocol/server';
import type { Server, ServerContext } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { Caller } from '../../kernel/caller';
import { clientFacingError } from '../../database/database-errors';
import { TaskService, TaskSnapshot, TaskView } from '../../tasks/task.service';
import { protocolErrorOf } from '../../kernel/json-rpc';
import { clientCapabilities, declaresExtension, Revision20260728Extension, requiredExtension } from './extension';

export const TASKS_EXTENSION_ID = 'io.modelcontextprotocol/tasks';

/** The Task object of the Tasks extension (SEP-2663), as CreateTaskResult and tasks/get carry it. */
export interface ExtensionTask {
  taskId: string;
  status: 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
}

/** The answer to a `tools/call` that became a task. */
export interface CreateTaskResult extends ExtensionTask {
  resultType: 'task';
  [key: string]: unknown;
}

/** A task as the extension shows it: the 2025-11-25 view with the extension's field names. */
export function taskFields(task: TaskView): ExtensionTask {
  return {
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage !== undefined && { statusMessage: task.statusMessage }),
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: task.ttl,
    pollIntervalMs: task.pollInterval,
  };
}

/**
 * The DetailedTask of `tasks/get`: the task with its result once completed. The stored rows follow
 * MCP 2025-11-25, where a tool result with `isError: true` makes the task `failed`; in the extension
 * that task `completed` with that result, and `failed` is only for a JSON-RPC error. Alcarta's tasks
 * never end in a JSON-RPC error (the call's own protocol errors come before a task exists), so a
 * `failed` row always holds the tool's error result.
 */
export function detailedTask({ task, result }: TaskSnapshot): Record<string, unknown> {
  const fields = taskFields(task);
  switch (task.status) {
    case 'completed':
    case 'failed':
      if (!result) throw new Error(`task ${task.taskId} is ${task.status} without a result`);
      // What the tools/call would have returned at 2026-07-28, where every result names its type.
      return { ...fields, status: 'completed', result: { ...result, resultType: 'complete' } };
    default:
      return { ...fields };
  }
}

const taskIdParams = z.object({ taskId: z.string() });
/**
 * Alcarta never asks for input, so every response is for a key that is not outstanding: ignored
 * (the v2 SDK lifts `inputResponses` out of the params anyway, as it does for multi round-trip requests).
 */
const updateParams = taskIdParams;
const anyResult = z.looseObject({});

/**
 * The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) at 2026-07-28 over Alcarta's
 * durable tasks: `tools/call` of a wait may answer with a task (Revision20260728ToolCalls), and `tasks/get`,
 * `tasks/update` and `tasks/cancel` act on it, and `subscriptions/listen` pushes its status
 * (`notifications/tasks`, TaskSubscriptions). Every method is bound to the caller's token, as at
 * 2025-11-25: another token's task is not found (-32602). The 2025-11-25 tasks methods
 * (TaskRequestHandlers) are the same tasks seen through the older revision.
 */
@Injectable()
export class TasksExtension implements Revision20260728Extension {
  readonly id = TASKS_EXTENSION_ID;
  readonly settings = {};
  readonly enabled = true;

  constructor(private readonly tasks: TaskService) {}

  register(server: Server, caller: Caller): void {
    server.setRequestHandler('tasks/get', { params: taskIdParams, result: anyResult }, (params, ctx) =>
      this.serve(ctx, async () => detailedTask(await this.tasks.snapshot(caller, params.taskId))),
    );
    server.setRequestHandler('tasks/update', { params: updateParams, result: anyResult }, (params, ctx) =>
      this.serve(ctx, async () => {
        await this.tasks.get(caller, params.taskId);
        return {};
      }),
    );
    // Cooperative, eventually consistent ack: a task that already ended stays as it ended.
    server.setRequestHandler('tasks/cancel', { params: taskIdParams, result: anyResult }, (params, ctx) =>
      this.serve(ctx, async () => {
        await this.tasks.cancelIfWorking(caller, params.taskId);
        return {};
      }),
    );
  }

  /**
   * Asking for `notifications/tasks` (`taskIds` in a `subscriptions/listen` filter) needs the
   * extension declared on that request; a declaring listen is served by TaskSubscriptions.
   */
  listenNeedsDeclaration(notifications: Record<string, unknown>): boolean {
    return notifications.taskIds !== undefined;
  }

  /**
   * A tasks/* request of a client that did not declare the extension on it: -32021. Task problems
   * are JSON-RPC errors: an unknown task (or another token's) -32602; the database unreachable or
   * the replica shutting down -32000 (protocolErrorOf).
   */
  private async serve<T>(ctx: ServerContext, run: () => Promise<T>): Promise<T> {
    if (!declaresExtension(clientCapabilities(ctx.mcpReq.envelope), TASKS_EXTENSION_ID)) {
      throw new MissingRequiredClientCapabilityError(
        requiredExtension(TASKS_EXTENSION_ID),
        'Missing required client capability: the io.modelcontextprotocol/tasks extension',
      );
    }
    try {
      return await run();
    } catch (err) {
      const known = clientFacingError(err);
      if (!known) throw err;
      const { code, message, data } = protocolErrorOf(known);
      throw new ProtocolError(code, message, data);
    }
  }
}
