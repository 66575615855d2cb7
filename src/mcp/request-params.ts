import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  InitializeRequestSchema,
  ListTasksRequestSchema,
  ListToolsRequestSchema,
  PingRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { ProtocolRevision, TASKS_REVISION } from './protocol-revision';

interface Issue {
  path: PropertyKey[];
  message: string;
}

interface RequestSchema {
  safeParse(value: unknown): { success: true; data: unknown } | { success: false; error: { issues: Issue[] } };
}

/** The SDK's own schema of every request this server answers, at every revision. */
const REQUESTS: Record<string, RequestSchema> = {
  initialize: InitializeRequestSchema,
  ping: PingRequestSchema,
  'tools/list': ListToolsRequestSchema,
  'tools/call': CallToolRequestSchema,
};

/** Only at 2025-11-25; before it the methods do not exist (-32601, answered by the SDK). */
const TASK_REQUESTS: Record<string, RequestSchema> = {
  'tasks/get': GetTaskRequestSchema,
  'tasks/result': GetTaskPayloadRequestSchema,
  'tasks/list': ListTasksRequestSchema,
  'tasks/cancel': CancelTaskRequestSchema,
};

const MAX_ISSUES = 3;
const MAX_ISSUE_CHARS = 160;

/**
 * Why a request's params are invalid, as a short `-32602` message ("Invalid params: params.name:
 * expected string, received number"), or undefined when they are valid or the method is not one
 * this server answers. The SDK parses params with the same schemas inside its handler wrapper and
 * reports a failure as -32603 with the validator's whole output; checking first keeps both the code
 * and the message right. A task `ttl` must also be a positive integer (docs/operators.md, "Limits
 * and hardening"): the SDK accepts any number, and a ttl of 0 would purge the task while its wait
 * still runs.
 */
export function invalidParams(request: JSONRPCRequest, revision: ProtocolRevision): string | undefined {
  const schema = REQUESTS[request.method] ?? (revision === TASKS_REVISION ? TASK_REQUESTS[request.method] : undefined);
  if (!schema) return undefined;
  const parsed = schema.safeParse(request);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, MAX_ISSUES).map(describe);
    const more = parsed.error.issues.length > MAX_ISSUES ? `; and ${parsed.error.issues.length - MAX_ISSUES} more` : '';
    return `Invalid params: ${issues.join('; ')}${more}`;
  }
  if (request.method === 'tools/call') {
    const ttl = (request.params as { task?: { ttl?: unknown } }).task?.ttl;
    if (ttl !== undefined && !(Number.isInteger(ttl) && (ttl as number) > 0)) {
      return 'Invalid params: params.task.ttl: must be a positive integer (milliseconds)';
    }
  }
  return undefined;
}

function describe(issue: Issue): string {
  const path = issue.path.map(String).join('.') || '(request)';
  const message =
    issue.message.length > MAX_ISSUE_CHARS ? `${issue.message.slice(0, MAX_ISSUE_CHARS)}…` : issue.message;
  return `${path}: ${message}`;
}
