import { Injectable } from '@nestjs/common';
import { Caller } from '../kernel/caller';
import { AccessEndReason, CredentialRevocationHooks } from '../auth/credential-revocation';
import { AlcartaError, conflict, invalidRequest } from '../kernel/errors';
import { hasIdShape, newId } from '../common/ids';
import { AppConfig } from '../config/app-config';
import { PersistedWaitRepository } from '../waits/persisted-wait.repository';
import { AwaitArguments, WaitService } from '../waits/wait.service';
import { TaskEntity, TaskStatus, TERMINAL_TASK_STATUSES } from './task.entity';
import { TaskPosition, TaskRepository } from './task.repository';

/** The Task object of MCP 2025-11-25, as tasks/get and friends return it. */
export interface TaskView {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttl: number;
  pollInterval: number;
}

/** A task with the CallToolResult it stores once terminal (null while it works, and when cancelled). */
export interface TaskSnapshot {
  task: TaskView;
  result: Record<string, unknown> | null;
}

/** The status message of a task cancelled because its token lost its access. */
const ACCESS_ENDED_MESSAGES: Record<AccessEndReason, string> = {
  token_revoked: 'The task was cancelled: its token was revoked.',
  token_expired: 'The task was cancelled: its token expired.',
  access_removed: 'The task was cancelled: access to a mailbox was removed (a grant was deleted).',
};

/** A task's extra life after its wait's deadline, by default: time to fetch the result. */
const DEFAULT_TTL_AFTER_WAIT_MS = 3600_000;
const PAGE_SIZE = 20;
/** How long one engine wait of a blocked tasks/result lasts before it looks at the task again. */
const RESULT_CHECK_MS = 600_000;
const CURSOR_PREFIX = 'tc1.';

/**
 * MCP Tasks over persisted waits. The wait does the work on whichever replica sees the outcome, and
 * the task completes in the transaction that fixes the wait's result (a resolution hook), so a
 * task survives the loss of the replica that created it. A task whose token is revoked or expires
 * is cancelled (a revocation hook). Every operation is scoped to the token that created the task:
 * other tokens get "not found".
 */
@Injectable()
export class TaskService {
  constructor(
    private readonly tasks: TaskRepository,
    private readonly waits: WaitService,
    private readonly persisted: PersistedWaitRepository,
    private readonly config: AppConfig,
    revocationHooks: CredentialRevocationHooks,
  ) {
    persisted.onResolved((manager, resolved) => this.tasks.completeForWaits(manager, resolved));
    revocationHooks.register({
      revoke: (manager, tokenId, reason) => this.tasks.cancelForToken(manager, tokenId, ACCESS_ENDED_MESSAGES[reason]),
      revokeLapsed: (manager) => this.tasks.cancelForLapsedTokens(manager, ACCESS_ENDED_MESSAGES),
    });
  }

  /** Starts a task for a wait; a bad argument throws the same AlcartaError the plain call would. */
  async start(caller: Caller, args: AwaitArguments, requestedTtlMs: number | undefined): Promise<TaskView> {
    // From the requested timeout, not the clock: time spent storing the wait must not shorten the ttl.
    const ttlMs = requestedTtlMs ?? args.timeout_seconds * 1000 + DEFAULT_TTL_AFTER_WAIT_MS;
    let task: TaskEntity | undefined;
    await this.waits.persistForTask(caller, args, async (manager, wait) => {
      // Counted under a per-token lock in the inserting transaction, so concurrent calls cannot
      // overshoot the cap; a refusal rolls the wait back too.
      const active = await this.tasks.countWorkingLocked(manager, caller.tokenId);
      if (active >= this.config.maxActiveTasksPerToken) {
        throw new AlcartaError(
          'limit_exceeded',
          'too_many_active_tasks',
          `This token already has ${active} working tasks (the limit is ${this.config.maxActiveTasksPerToken}); ` +
            'wait for some to finish or cancel them.',
          { max_active_tasks: this.config.maxActiveTasksPerToken },
        );
      }
      task = this.newTask(caller, wait.id, 'working', null, null, ttlMs);
      await this.tasks.insert(task, manager);
    });
    return view(task!);
  }

  /**
   * A task-augmented call whose tool call failed at once (bad arguments, limits): per MCP, a tool
   * result with `isError` makes the task `failed`, and tasks/result returns that result.
   */
  async startFailed(
    caller: Caller,
    result: Record<string, unknown>,
    message: string,
    requestedTtlMs: number | undefined,
  ): Promise<TaskView> {
    const task = this.newTask(caller, null, 'failed', message, result, requestedTtlMs ?? DEFAULT_TTL_AFTER_WAIT_MS);
    await this.tasks.insert(task);
    return view(task);
  }

  async get(caller: Caller, taskId: string): Promise<TaskView> {
    return view(await this.find(caller, taskId));
  }

  /** The task as it is now, with its stored result once terminal; never blocks (the 2026-07-28 tasks/get). */
  async snapshot(caller: Caller, taskId: string): Promise<TaskSnapshot> {
    const task = await this.find(caller, taskId);
    return { task: view(task), result: task.result };
  }

  async list(caller: Caller, cursor: string | undefined): Promise<{ tasks: TaskView[]; nextCursor?: string }> {
    const rows = await this.tasks.page(
      caller.tokenId,
      cursor === undefined ? undefined : parseCursor(cursor),
      PAGE_SIZE + 1,
    );
    const page = rows.slice(0, PAGE_SIZE);
    const last = page[page.length - 1];
    return {
      tasks: page.map(view),
      ...(rows.length > PAGE_SIZE && { nextCursor: formatCursor({ createdAt: last.createdAt, id: last.id }) }),
    };
  }

  /** Cancels a working task: it is `cancelled` before this returns, and its wait stops everywhere. */
  async cancel(caller: Caller, taskId: string): Promise<TaskView> {
    const outcome = await this.cancelIfWorking(caller, taskId);
    if (!outcome.cancelled) {
      throw conflict('task_terminal', `Cannot cancel task: already in terminal status '${outcome.task.status}'.`, {
        status: outcome.task.status,
      });
    }
    return outcome.task;
  }

  /**
   * Cancels the task if it still works (as `cancel` does: `cancelled` before this returns, its wait
   * stopped everywhere); a task that has ended stays as it ended. Unknown to the caller: not found.
   */
  async cancelIfWorking(caller: Caller, taskId: string): Promise<{ task: TaskView; cancelled: boolean }> {
    const outcome = hasIdShape(taskId, 'task')
      ? await this.tasks.cancel(taskId, caller.tokenId, 'The task was cancelled by request.')
      : null;
    if (!outcome) throw taskNotFound(taskId);
    return { task: view(outcome.task), cancelled: outcome.cancelled };
  }

  /**
   * The task's result, once it is terminal: blocks on the wait engine (woken by the doorbell of
   * the wait's resolution, on any replica), never by polling.
   */
  async result(caller: Caller, taskId: string, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const task = await this.ended(caller, taskId, signal);
    if (task.status === 'cancelled') {
      throw conflict('task_cancelled', `Task ${taskId} was cancelled; it has no result.`, { status: task.status });
    }
    return task.result!;
  }

  /** The task as it is once it has ended (completed, failed or cancelled), waiting as `result` does. */
  async awaitEnd(caller: Caller, taskId: string, signal?: AbortSignal): Promise<TaskSnapshot> {
    const task = await this.ended(caller, taskId, signal);
    return { task: view(task), result: task.result };
  }

  /** The task row once terminal, parked on its wait between reads. */
  private async ended(caller: Caller, taskId: string, signal?: AbortSignal): Promise<TaskEntity> {
    for (let missingWait = false; ;) {
      const task = await this.find(caller, taskId);
      if (TERMINAL_TASK_STATUSES.includes(task.status)) return task;
      const wait = task.waitId ? await this.persisted.find(task.waitId) : null;
      if (!wait) {
        // Resolved and purged between the two reads: the task row, read again, says how it ended.
        if (missingWait) throw new Error(`task ${taskId} is working but its wait is gone`);
        missingWait = true;
        continue;
      }
      // Only whether the wait for the result met a shutdown matters: otherwise the task row, read
      // again, says how it ended (or that it still works).
      const outcome = await this.waits.awaitResult(wait, {
        credential: caller,
        delivery: 'poll',
        timeoutMs: RESULT_CHECK_MS,
        signal,
      });
      if (signal?.aborted) throw new AlcartaError('invalid_request', 'cancelled', 'The request was cancelled.');
      if (outcome.shutdown) {
        throw new AlcartaError(
          'unavailable',
          'shutting_down',
          'This server is restarting; call tasks/result again (the task goes on, on another replica).',
        );
      }
    }
  }

  private async find(caller: Caller, taskId: string): Promise<TaskEntity> {
    // An id that cannot be a task's (a NUL, another shape) is unknown without asking the database.
    const task = hasIdShape(taskId, 'task') ? await this.tasks.findForToken(taskId, caller.tokenId) : null;
    if (!task) throw taskNotFound(taskId);
    return task;
  }

  private newTask(
    caller: Caller,
    waitId: string | null,
    status: TaskStatus,
    statusMessage: string | null,
    result: Record<string, unknown> | null,
    requestedTtlMs: number,
  ): TaskEntity {
    const now = new Date();
    const ttlMs = Math.max(0, Math.min(Math.round(requestedTtlMs), this.config.taskMaxTtlMs));
    return {
      id: newId('task'),
      tokenId: caller.tokenId,
      waitId,
      status,
      statusMessage,
      result,
      createdAt: now,
      lastUpdatedAt: now,
      ttlMs,
      pollIntervalMs: this.config.taskPollIntervalMs,
      expiresAt: new Date(now.getTime() + ttlMs),
    };
  }
}

function view(task: TaskEntity): TaskView {
  return {
    taskId: task.id,
    status: task.status,
    ...(task.statusMessage !== null && { statusMessage: task.statusMessage }),
    createdAt: task.createdAt.toISOString(),
    lastUpdatedAt: task.lastUpdatedAt.toISOString(),
    ttl: task.ttlMs,
    pollInterval: task.pollIntervalMs,
  };
}

function taskNotFound(taskId: string): AlcartaError {
  return new AlcartaError('not_found', 'task_not_found', `Task not found: ${taskId}`, { task_id: taskId });
}

function formatCursor(position: TaskPosition): string {
  return (
    CURSOR_PREFIX + Buffer.from(JSON.stringify([position.createdAt.toISOString(), position.id])).toString('base64url')
  );
}

function parseCursor(cursor: string): TaskPosition {
  const fail = () => invalidRequest('invalid_cursor', 'The cursor is not one tasks/list issued.');
  if (!cursor.startsWith(CURSOR_PREFIX)) throw fail();
  try {
    const [createdAt, id] = JSON.parse(
      Buffer.from(cursor.slice(CURSOR_PREFIX.length), 'base64url').toString(),
    ) as unknown[];
    const date = new Date(createdAt as string);
    if (typeof createdAt !== 'string' || typeof id !== 'string' || !(date.getTime() >= 0)) throw fail();
    // Only what tasks/list writes: a task id and a date PostgreSQL can compare (no NUL, no year -200000).
    if (!hasIdShape(id, 'task') || date.getFullYear() > 9999) throw fail();
    return { createdAt: date, id };
  } catch {
    throw fail();
  }
}
