import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Caller, OPERATOR } from '#app/kernel/caller.js';
import { TokenService } from '#app/auth/token.service.js';
import { AlcartaError } from '#app/kernel/errors.js';
import { MessageService } from '#app/mail/message.service.js';
import { TaskRepository } from '#app/tasks/task.repository.js';
import { TaskService } from '#app/tasks/task.service.js';
import { AwaitArguments } from '#app/waits/wait.service.js';
import { WaiterRegistry } from '#app/waits/waiter-registry.js';
import { inbound, refused, ServiceTier, startServiceTier } from '../support/service-tier';
import { waitFor } from '../support/wait-for';

const MAX_ACTIVE = 3;
const MAX_TTL_SECONDS = 7200;

/**
 * TaskService: a task is a persisted wait with a status. It completes in the transaction that fixes
 * its wait's result, is cancelled by request or when its token loses access, is bounded in number
 * per token and in ttl, is purged after its ttl, and exists only for the token that created it.
 */
describe('TaskService', () => {
  let tier: ServiceTier;
  let tasks: TaskService;
  let mailbox: string;
  let agent: Caller;
  let other: Caller;

  before(async () => {
    tier = await startServiceTier({
      env: {
        ALCARTA_MAX_ACTIVE_TASKS_PER_TOKEN: String(MAX_ACTIVE),
        ALCARTA_TASK_MAX_TTL_SECONDS: String(MAX_TTL_SECONDS),
      },
    });
    await tier.startDoorbells();
    tier.startWaitEngine();
    tasks = tier.get(TaskService);
    mailbox = await tier.mailbox();
    agent = await tier.caller(['mail:read', 'approvals:read'], [mailbox]);
    other = await tier.caller(['mail:read', 'approvals:read'], [mailbox]);
  });
  after(() => tier?.close());

  const messageWait = (subject: string, timeoutSeconds = 300): AwaitArguments => ({
    event: { type: 'message_received', mailbox_id: mailbox, subject_contains: subject },
    timeout_seconds: timeoutSeconds,
    delivery: 'poll',
  });

  /** Resolves once a tasks/result call is parked on the task's wait (its first read done). */
  async function blockedOn(taskId: string): Promise<void> {
    const [{ wait_id }] = await tier.db.query<{ wait_id: string }>(`SELECT wait_id FROM tasks WHERE id = $1`, [taskId]);
    await waitFor('tasks/result to block', () =>
      tier
        .get(WaiterRegistry)
        .resultWaiters(wait_id)
        .some((w) => w.timer !== undefined),
    );
  }

  it('a working task completes when its wait matches; tasks/result blocks until then and returns the match', async () => {
    const task = await tasks.start(agent, messageWait('invoice 17'), undefined);
    assert.equal(task.status, 'working');
    assert.equal(task.ttl, 300_000 + 3600_000, 'by default the wait plus an hour to fetch the result');

    const result = tasks.result(agent, task.taskId);
    await blockedOn(task.taskId);
    await tier.get(MessageService).store([mailbox], inbound({ subject: 'unrelated' }));
    const { messageId } = (await tier.get(MessageService).store([mailbox], inbound({ subject: 'Invoice 17' })))[0];

    const answer = (await result) as { structuredContent: { matched: boolean; events: Array<{ message_id: string }> } };
    assert.equal(answer.structuredContent.matched, true);
    assert.deepEqual(
      answer.structuredContent.events.map((e) => e.message_id),
      [messageId],
    );
    const done = await tasks.get(agent, task.taskId);
    assert.equal(done.status, 'completed');
    assert.deepEqual(await tasks.result(agent, task.taskId), answer, 'the stored result, again');
  });

  it('a wait that times out completes its task with timed_out', async () => {
    const task = await tasks.start(agent, messageWait('never', 1), undefined);
    const snapshot = await tasks.awaitEnd(agent, task.taskId);
    assert.equal(snapshot.task.status, 'completed');
    const wait = snapshot.result?.structuredContent as { matched: boolean; timed_out: boolean };
    assert.deepEqual([wait.matched, wait.timed_out], [false, true]);
  });

  it('cancel ends a working task at once and stops its wait; a terminal task cannot be cancelled', async () => {
    const task = await tasks.start(agent, messageWait('cancel me'), undefined);
    const waiting = tasks.awaitEnd(agent, task.taskId);
    await blockedOn(task.taskId);
    const cancelled = await tasks.cancel(agent, task.taskId);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(cancelled.statusMessage, 'The task was cancelled by request.');
    assert.equal((await waiting).task.status, 'cancelled', 'a blocked result wakes on the cancel');
    await refused(tasks.result(agent, task.taskId), 'conflict', 'task_cancelled');
    await refused(tasks.cancel(agent, task.taskId), 'conflict', 'task_terminal');
    assert.deepEqual(await tasks.cancelIfWorking(agent, task.taskId), { task: cancelled, cancelled: false });

    // The wait was stopped in the same transaction: no replica watches it any more.
    const [wait] = await tier.db.query<{ status: string; owner: string | null }>(
      `SELECT w.status, w.owner FROM waits w JOIN tasks t ON t.wait_id = w.id WHERE t.id = $1`,
      [task.taskId],
    );
    assert.deepEqual(wait, { status: 'resolved', owner: null });
  });

  it("another token's tasks, unknown ids and malformed ids are all task_not_found", async () => {
    const task = await tasks.start(agent, messageWait('mine'), undefined);
    for (const id of [task.taskId, 'task_doesnotexist', 'not\u0000a task']) {
      await refused(tasks.get(other, id), 'not_found', 'task_not_found');
      await refused(tasks.cancel(other, id), 'not_found', 'task_not_found');
      await refused(tasks.result(other, id), 'not_found', 'task_not_found');
    }
    assert.ok(!(await tasks.list(other, undefined)).tasks.some((t) => t.taskId === task.taskId));
    assert.ok((await tasks.list(agent, undefined)).tasks.some((t) => t.taskId === task.taskId));
    await tasks.cancel(agent, task.taskId);
  });

  it('at most ALCARTA_MAX_ACTIVE_TASKS_PER_TOKEN work at once, even when started concurrently', async () => {
    const capped = await tier.caller(['mail:read'], [mailbox]);
    const starts = await Promise.allSettled(
      Array.from({ length: MAX_ACTIVE + 3 }, () => tasks.start(capped, messageWait('cap'), undefined)),
    );
    const started = starts.filter((s) => s.status === 'fulfilled');
    assert.equal(started.length, MAX_ACTIVE);
    for (const s of starts) {
      if (s.status === 'rejected') assert.equal((s.reason as AlcartaError).reason, 'too_many_active_tasks');
    }
    // A refused start leaves no wait behind.
    const [{ n }] = await tier.db.query<{ n: string }>(`SELECT count(*) AS n FROM waits WHERE token_id = $1`, [
      capped.tokenId,
    ]);
    assert.equal(Number(n), MAX_ACTIVE);

    await tasks.cancel(capped, (started[0] as PromiseFulfilledResult<{ taskId: string }>).value.taskId);
    assert.equal((await tasks.start(capped, messageWait('cap'), undefined)).status, 'working');
  });

  it('a requested ttl is capped at ALCARTA_TASK_MAX_TTL_SECONDS; past its ttl a task is purged with its wait', async () => {
    const task = await tasks.start(agent, messageWait('ttl'), 10 * MAX_TTL_SECONDS * 1000);
    assert.equal(task.ttl, MAX_TTL_SECONDS * 1000);
    const [{ wait_id }] = await tier.db.query<{ wait_id: string }>(`SELECT wait_id FROM tasks WHERE id = $1`, [
      task.taskId,
    ]);

    await tier.db.query(`UPDATE tasks SET expires_at = now() - interval '1 second' WHERE id = $1`, [task.taskId]);
    assert.ok((await tier.get(TaskRepository).purgeExpired()) >= 1);
    await refused(tasks.get(agent, task.taskId), 'not_found', 'task_not_found');
    assert.deepEqual(await tier.db.query(`SELECT id FROM waits WHERE id = $1`, [wait_id]), []);
  });

  it('a failed start is a failed task whose result is the error; tasks/list pages by cursor', async () => {
    const lister = await tier.caller(['mail:read'], [mailbox]);
    const failed = await tasks.startFailed(lister, { isError: true, content: [] }, 'bad arguments', undefined);
    assert.equal(failed.status, 'failed');
    assert.deepEqual(await tasks.result(lister, failed.taskId), { isError: true, content: [] });

    for (let i = 0; i < 22; i++) await tasks.startFailed(lister, { isError: true }, `failure ${i}`, undefined);
    const first = await tasks.list(lister, undefined);
    assert.equal(first.tasks.length, 20);
    assert.ok(first.nextCursor);
    const second = await tasks.list(lister, first.nextCursor);
    assert.equal(second.tasks.length, 3);
    assert.equal(second.nextCursor, undefined);
    const ids = [...first.tasks, ...second.tasks].map((t) => t.taskId);
    assert.equal(new Set(ids).size, 23, 'no task twice across pages');
    await refused(tasks.list(lister, 'tc1.bm90IGEgY3Vyc29y'), 'invalid_request', 'invalid_cursor');
  });

  it("a token's revocation cancels its working tasks, saying why", async () => {
    const doomed = await tier.caller(['mail:read'], [mailbox]);
    const task = await tasks.start(doomed, messageWait('revoked'), undefined);
    // Whoever still waits for the result with that token is told its access ended.
    const blocked = refused(tasks.awaitEnd(doomed, task.taskId), 'unauthorized', 'token_revoked');
    await blockedOn(task.taskId);
    // In the revoking transaction: no later read can see the task working.
    await tier.get(TokenService).revoke(OPERATOR, doomed.tokenId);
    const [row] = await tier.db.query<{ status: string; status_message: string }>(
      `SELECT status, status_message FROM tasks WHERE id = $1`,
      [task.taskId],
    );
    assert.deepEqual(row, { status: 'cancelled', status_message: 'The task was cancelled: its token was revoked.' });
    await blocked;
  });
});
