import { Injectable, Logger } from '@nestjs/common';
import {
  isSpecType,
  ProtocolErrorCode,
  SERVER_INFO_META_KEY,
  SUBSCRIPTION_ID_META_KEY,
} from '@modelcontextprotocol/server';
import type { RequestId } from '@modelcontextprotocol/server';
import { Request, Response } from 'express';
import { z } from 'zod';
import { Caller } from '../../kernel/caller';
import { AlcartaError } from '../../kernel/errors';
import { AppConfig } from '../../config/app-config';
import { clientFacingError } from '../../database/database-errors';
import { TERMINAL_TASK_STATUSES } from '../../tasks/task.entity';
import { TaskService, TaskSnapshot } from '../../tasks/task.service';
import { SSE_HEADERS } from '../blocking-call.responder';
import { jsonRpcError, protocolErrorOf } from '../../kernel/json-rpc';
import { SERVER_INFO } from '../server-identity';
import { clientCapabilities, declaresExtension } from './extension';
import { Revision20260728RequestClassifier } from './request-classifier';
import { detailedTask, TASKS_EXTENSION_ID } from './tasks-extension';

/** A `subscriptions/listen` for task status, as `match` hands it over: `taskIds` not yet checked. */
export interface TaskListen {
  id: RequestId;
  taskIds: unknown;
}

/**
 * `notifications/tasks` over `subscriptions/listen` (the Tasks extension, SEP-2663, on the
 * 2026-07-28 subscriptions pattern). The v2 SDK's listen router knows only the core filter fields,
 * so a listen that asks for `taskIds` and declares the extension is served here; everything else
 * about `subscriptions/listen` (the other filters, every refusal) stays the SDK's.
 *
 * The wire is the SDK router's: one SSE response whose first frame is
 * `notifications/subscriptions/acknowledged`, every frame stamped with the subscription id (the
 * listen request's id) in `_meta`, `: keepalive` comments, and a graceful end that is the JSON-RPC
 * result `{resultType: 'complete'}` of the listen request. Where the spec is silent, Alcarta chooses:
 *
 * - Honored: the requested ids of tasks of the caller's token, each once, in the order asked. An
 *   unknown id, or another token's, is left out of the acknowledged filter and yields nothing, as it
 *   is "not found" for tasks/get. No other filter field is honored (Alcarta advertises no
 *   `listChanged` and no resources), so the acknowledgement names only `taskIds`, and nothing at all
 *   when no id is honored; the subscription then ends at once, as the SDK ends an empty one.
 * - Right after the acknowledgement, each honored task's current DetailedTask (what tasks/get would
 *   return): a client that listens after its tools/call returned, or after a tasks/get, misses no
 *   change in between. Then one notification per status change. Alcarta's tasks go from `working`
 *   straight to a terminal status (they never ask for input), so a working task gives one more.
 * - Once every honored task is terminal nothing more can come: the subscription ends gracefully.
 * - A replica that shuts down ends its subscriptions gracefully too, so clients listen again on
 *   another one; a client closing the stream releases the waits at once.
 * - A wait that fails otherwise (the token lost its access, the database is unreachable) ends the
 *   subscription with a JSON-RPC error for the listen request (-32603, Alcarta's error in `data`).
 *
 * Waiting is TaskService.awaitEnd's, the loop of tasks/result: parked on the wait engine, woken by
 * the doorbell of the wait's resolution or of the task's cancellation, on any replica; no polling,
 * no registry of its own.
 */
@Injectable()
export class TaskSubscriptions {
  private readonly logger = new Logger(TaskSubscriptions.name);

  constructor(
    private readonly tasks: TaskService,
    private readonly config: AppConfig,
    private readonly revision20260728Requests: Revision20260728RequestClassifier,
  ) {}

  /**
   * The request, if it is a `subscriptions/listen` asking for `taskIds` with the extension declared
   * that the v2 SDK would serve with nothing to refuse: its inbound classification routes it to the
   * SDK's `modern` era at this revision (Revision20260728RequestClassifier; listen has no
   * `Mcp-Name`), and the request is a SubscriptionsListenRequest by the SDK's schema (which does
   * not look at `taskIds`: `serve` does). Anything else is left to the SDK, -32021 to the endpoint.
   */
  match(req: Request): TaskListen | undefined {
    const message = this.revision20260728Requests.request(req, 'subscriptions/listen');
    if (!message || !isSpecType.SubscriptionsListenRequest(message)) return undefined;
    const notifications = message.params.notifications as Record<string, unknown>;
    if (!('taskIds' in notifications)) return undefined;
    if (!declaresExtension(clientCapabilities(message.params._meta), TASKS_EXTENSION_ID)) return undefined;
    return { id: message.id, taskIds: notifications.taskIds };
  }

  /** Serves the subscription until its tasks end, the replica shuts down or the client goes. */
  async serve(listen: TaskListen, caller: Caller, res: Response): Promise<void> {
    const subscriptionId = listen.id;
    const requested = this.taskIdsParam().safeParse(listen.taskIds);
    if (!requested.success) {
      res
        .status(200)
        .json(jsonRpcError(subscriptionId, ProtocolErrorCode.InvalidParams, invalidTaskIdsMessage(this.config)));
      return;
    }
    const stop = new AbortController();
    res.on('close', () => stop.abort());

    const honored: TaskSnapshot[] = [];
    try {
      for (const taskId of new Set(requested.data)) {
        const snapshot = await this.visible(caller, taskId);
        if (snapshot) honored.push(snapshot);
      }
    } catch (err) {
      // Nothing is written yet: an unreachable database is the HTTP 503 every other request gets.
      if (clientFacingError(err)?.code === 'unavailable') throw err;
      res.status(200).json(this.failure(subscriptionId, err));
      return;
    }

    const send = (message: object) => {
      if (!res.writableEnded && !res.destroyed) res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    };
    const notify = (snapshot: TaskSnapshot) =>
      send({
        jsonrpc: '2.0',
        method: 'notifications/tasks',
        params: { ...detailedTask(snapshot), _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId } },
      });
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();
    send({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: {
        notifications: honored.length > 0 ? { taskIds: honored.map((s) => s.task.taskId) } : {},
        _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId },
      },
    });
    for (const snapshot of honored) notify(snapshot);

    const keepalive = setInterval(() => {
      if (!res.writableEnded) res.write(': keepalive\n\n');
    }, this.config.keepaliveMs);
    let end: object = complete(subscriptionId);
    try {
      const working = honored.filter((s) => !TERMINAL_TASK_STATUSES.includes(s.task.status)).map((s) => s.task.taskId);
      await Promise.all(working.map((taskId) => this.follow(caller, taskId, stop.signal, notify)));
    } catch (err) {
      // The first wait to fail ends the subscription: the others are released.
      stop.abort();
      if (!(err instanceof AlcartaError && err.reason === 'shutting_down')) end = this.failure(subscriptionId, err);
    } finally {
      clearInterval(keepalive);
    }
    // The end and the end of the stream in one write; a client that closed the stream gets nothing.
    if (!res.writableEnded && !res.destroyed) res.end(`event: message\ndata: ${JSON.stringify(end)}\n\n`);
  }

  /**
   * A subscription that could not be served, with Alcarta's error body when there is one: -32000
   * when the database became unreachable (retry), else -32603.
   */
  private failure(subscriptionId: RequestId, err: unknown): object {
    const known = clientFacingError(err);
    if (known?.code === 'unavailable') {
      const { code, message, data } = protocolErrorOf(known);
      return jsonRpcError(subscriptionId, code, message, data);
    }
    if (known) return jsonRpcError(subscriptionId, ProtocolErrorCode.InternalError, known.message, known.toBody());
    this.logger.error(err);
    return jsonRpcError(subscriptionId, ProtocolErrorCode.InternalError, 'Internal error');
  }

  /** The task ids a listen may name: at most as many as a token may have working tasks. */
  private taskIdsParam() {
    return z.array(z.string()).max(this.config.maxActiveTasksPerToken);
  }

  /** The task as it is now, or undefined when the caller cannot see it (unknown, another token's). */
  private async visible(caller: Caller, taskId: string): Promise<TaskSnapshot | undefined> {
    try {
      return await this.tasks.snapshot(caller, taskId);
    } catch (err) {
      if (err instanceof AlcartaError && err.code === 'not_found') return undefined;
      throw err;
    }
  }

  /**
   * Waits for a working task to end and notifies its final DetailedTask. A task that disappears
   * meanwhile (its ttl ran out) is simply no longer followed: tasks/get would not find it either.
   */
  private async follow(
    caller: Caller,
    taskId: string,
    signal: AbortSignal,
    notify: (snapshot: TaskSnapshot) => void,
  ): Promise<void> {
    let snapshot: TaskSnapshot;
    try {
      snapshot = await this.tasks.awaitEnd(caller, taskId, signal);
    } catch (err) {
      if (signal.aborted || (err instanceof AlcartaError && err.code === 'not_found')) return;
      throw err;
    }
    if (!signal.aborted) notify(snapshot);
  }
}

function invalidTaskIdsMessage(config: AppConfig): string {
  return `Invalid params: notifications.taskIds must be an array of task ids (strings), at most ${config.maxActiveTasksPerToken}`;
}

/** The graceful end of a subscription: the listen request's result (2026-07-28 Subscriptions, Graceful Closure). */
function complete(subscriptionId: RequestId): object {
  return {
    jsonrpc: '2.0',
    id: subscriptionId,
    result: {
      resultType: 'complete',
      _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId, [SERVER_INFO_META_KEY]: SERVER_INFO },
    },
  };
}
