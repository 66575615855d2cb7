import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  McpError,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult, Task } from '@modelcontextprotocol/sdk/types.js';

/**
 * Starts a task-augmented `tools/call` (MCP 2025-11-25: `params.task`, with `ttl` when given) through
 * the SDK client and returns the Task of its CreateTaskResult.
 */
export async function startTask(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  ttl?: number,
): Promise<Task> {
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args } },
    CreateTaskResultSchema,
    { task: ttl === undefined ? {} : { ttl } },
  );
  return created.task;
}

/** `tasks/result` through the SDK client. */
export function taskResult(client: Client, taskId: string, options?: RequestOptions): Promise<CallToolResult> {
  return client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, options);
}

/** Asserts that `promise` rejects with a JSON-RPC error of `code`; returns the error's `data`. */
export async function rejectsWith(promise: Promise<unknown>, code: number, what: string): Promise<any> {
  let data: unknown;
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof McpError, `${what}: ${String(err)}`);
    assert.equal(err.code, code, `${what}: ${err.message}`);
    data = err.data;
    return true;
  });
  return data;
}

/**
 * Checks a task's successful CallToolResult: no `isError`, the related-task `_meta` naming the
 * task, `structuredContent` mirrored as JSON text. Returns the structuredContent.
 */
export function taskContent(result: CallToolResult, taskId: string): any {
  assert.notEqual(result.isError, true, `the task failed: ${JSON.stringify(result.structuredContent)}`);
  return taskPayload(result, taskId);
}

/** Like `taskContent`, for a task whose result is a tool error: returns its `{error, reason, …}`. */
export function taskToolError(result: CallToolResult, taskId: string): any {
  assert.equal(result.isError, true, `expected a tool error, got ${JSON.stringify(result.structuredContent)}`);
  return taskPayload(result, taskId);
}

function taskPayload(result: CallToolResult, taskId: string): any {
  assert.deepEqual(result._meta?.[RELATED_TASK_META_KEY], { taskId });
  assert.ok(result.structuredContent, 'no structuredContent');
  const text = result.content.find((c) => c.type === 'text');
  assert.ok(text && text.type === 'text', 'no text content');
  assert.deepEqual(JSON.parse(text.text), result.structuredContent, 'the text mirrors structuredContent');
  return result.structuredContent;
}

/** Every field MCP 2025-11-25 gives a Task, with the types it gives them. */
export function assertTaskShape(task: Task, status: Task['status']): void {
  assert.equal(typeof task.taskId, 'string');
  assert.ok(task.taskId.length >= 16, 'task ids are unguessable');
  assert.equal(task.status, status);
  for (const field of ['createdAt', 'lastUpdatedAt'] as const) {
    assert.equal(typeof task[field], 'string', field);
    assert.ok(!Number.isNaN(Date.parse(task[field])), `${field} is a date-time`);
  }
  assert.equal(typeof task.ttl, 'number');
  assert.equal(typeof task.pollInterval, 'number');
  assert.ok(task.pollInterval! > 0);
}
