import { Inject, Injectable, Logger } from '@nestjs/common';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult, CreateTaskResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Caller } from '../kernel/caller';
import { AlcartaError, invalidRequest } from '../kernel/errors';
import { assertStorableJson } from '../common/text-safety';
import { clientFacingError } from '../database/database-errors';
import { TaskService, TaskView } from '../tasks/task.service';
import { protocolErrorOf } from '../kernel/json-rpc';
import { ProtocolRevision, TASKS_REVISION } from './protocol-revision';
import { TOOL_PROVIDERS, ToolContext, ToolDefinition, ToolProvider } from './tool-definition';

interface CatalogEntry {
  definition: ToolDefinition;
  /** The `tools/list` entry, built once at start: it is the same for every request. */
  listing: Tool;
}

/**
 * All tools, each shown only to tokens whose scopes allow it. Validates arguments with the tool's
 * schema and turns every outcome into a CallToolResult with `structuredContent` (docs/agents.md, "Tools").
 */
@Injectable()
export class ToolCatalog {
  private readonly logger = new Logger(ToolCatalog.name);
  private readonly entries: ReadonlyMap<string, CatalogEntry>;

  constructor(
    @Inject(TOOL_PROVIDERS) providers: ToolProvider[],
    private readonly tasks: TaskService,
  ) {
    const entries = new Map<string, CatalogEntry>();
    for (const definition of providers.flatMap((p) => p.tools())) {
      const { $schema: _dialect, ...inputSchema } = z.toJSONSchema(definition.input, { io: 'input' });
      entries.set(definition.name, {
        definition,
        listing: {
          name: definition.name,
          title: definition.title,
          description: definition.description,
          inputSchema: inputSchema as Tool['inputSchema'],
          ...(definition.annotations && { annotations: { title: definition.title, ...definition.annotations } }),
        },
      });
    }
    this.entries = entries;
  }

  /** At 2025-11-25 the tools that run as tasks say so (`taskSupport: "optional"`); before, no tool has `execution`. */
  list(caller: Caller, revision: ProtocolRevision): Tool[] {
    return [...this.entries.values()]
      .filter((e) => caller.hasAnyScope(e.definition.scopes))
      .map((e) =>
        e.definition.task && revision === TASKS_REVISION
          ? { ...e.listing, execution: { taskSupport: 'optional' as const } }
          : e.listing,
      );
  }

  /**
   * A task-augmented call: the task is created at once and the work goes on in the background. A
   * tool without task support answers -32601 before anything runs (no side effects); a mistake in
   * the arguments gives a task that failed with the same error result the plain call would return.
   */
  async callAsTask(
    name: string,
    rawArgs: unknown,
    ctx: ToolContext,
    ttlMs: number | undefined,
  ): Promise<CreateTaskResult> {
    const entry = this.permitted(name, ctx.caller);
    if (!entry.definition.task) {
      throw new McpError(ErrorCode.MethodNotFound, `Tool ${name} does not support task-augmented calls`);
    }
    const started = await this.startTask(entry.definition, rawArgs, ctx, ttlMs);
    const task =
      started instanceof AlcartaError
        ? await this.tasks.startFailed(ctx.caller, failure(started), started.message, ttlMs)
        : started;
    return {
      task,
      _meta: {
        'io.modelcontextprotocol/model-immediate-response': `Started task ${task.taskId}. It completes when the wait resolves; tasks/result returns its result.`,
      },
    };
  }

  /** Whether the tool can run as a task (the waits) for this caller. */
  supportsTask(name: string, caller: Caller): boolean {
    const entry = this.entries.get(name);
    return !!entry?.definition.task && caller.hasAnyScope(entry.definition.scopes);
  }

  /**
   * A call the Tasks extension (2026-07-28) runs as a task: the task, durably created, or, when the
   * call fails at once (bad arguments, limits), the error result the plain call returns and no task:
   * the extension lets the server decide per call, and a task that is born finished helps no one.
   */
  async callAsExtensionTask(
    name: string,
    rawArgs: unknown,
    ctx: ToolContext,
  ): Promise<{ task: TaskView } | { result: CallToolResult }> {
    const entry = this.permitted(name, ctx.caller);
    if (!entry.definition.task) throw new Error(`Tool ${name} has no task support (ask supportsTask first)`);
    // No ttl in the extension's request: the task lives as long as its wait, plus time to fetch the result.
    const started = await this.startTask(entry.definition, rawArgs, ctx, undefined);
    return started instanceof AlcartaError ? { result: failure(started) } : { task: started };
  }

  /**
   * Starts the tool's task; a mistake the plain call would report comes back as its AlcartaError.
   * An unavailable database is no mistake of the call, and there is no task to hold it (it could
   * not be stored either): a JSON-RPC error (-32000) that says to retry.
   */
  private async startTask(
    definition: ToolDefinition,
    rawArgs: unknown,
    ctx: ToolContext,
    ttlMs: number | undefined,
  ): Promise<TaskView | AlcartaError> {
    try {
      return await definition.task!(parseArguments(definition, rawArgs ?? {}), ctx, ttlMs);
    } catch (err) {
      const known = clientFacingError(err);
      if (known?.code === 'unavailable') {
        const { code, message, data } = protocolErrorOf(known);
        throw new McpError(code, message, data);
      }
      if (known) return known;
      this.logger.error(err instanceof Error ? err : String(err));
      throw new McpError(ErrorCode.InternalError, 'Internal error');
    }
  }

  /** Tools the token may not use are reported exactly like tools that do not exist. */
  private permitted(name: string, caller: Caller): CatalogEntry {
    const entry = this.entries.get(name);
    if (!entry || !caller.hasAnyScope(entry.definition.scopes)) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
    return entry;
  }

  isBlocking(name: string, caller: Caller): boolean {
    const entry = this.entries.get(name);
    return !!entry?.definition.blocking && caller.hasAnyScope(entry.definition.scopes);
  }

  async call(name: string, rawArgs: unknown, ctx: ToolContext): Promise<CallToolResult> {
    const entry = this.permitted(name, ctx.caller);
    try {
      const args = parseArguments(entry.definition, rawArgs ?? {});
      return success(await entry.definition.handle(args, ctx));
    } catch (err) {
      // A mistake of the call, or the database going away (or refusing a value) during it.
      const known = clientFacingError(err);
      if (known) return failure(known);
      this.logger.error(err instanceof Error ? err : String(err));
      throw new McpError(ErrorCode.InternalError, 'Internal error');
    }
  }
}

function parseArguments(tool: ToolDefinition, raw: unknown): Record<string, unknown> {
  assertStorableJson(raw, 'argument');
  const parsed = tool.input.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    return fail('unknown_argument', `Unknown argument(s) of ${tool.name}: ${issue.keys.join(', ')}.`, issue.keys[0]);
  }
  const missing = valueAt(raw, issue.path) === undefined;
  const detail = parsed.error.issues.map((i) => `${i.path.map(String).join('.') || '(arguments)'}: ${i.message}`);
  return fail(missing ? 'missing_argument' : 'invalid_argument', detail.join('; '), path);
}

function fail(reason: string, message: string, argument: string | undefined): never {
  throw invalidRequest(reason, message, argument ? { argument } : {});
}

function valueAt(value: unknown, path: PropertyKey[]): unknown {
  return path.reduce<unknown>(
    (v, key) => (v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[key] : undefined),
    value,
  );
}

/**
 * Results up to this size (as JSON) are mirrored whole in the text item. Above it the text item is
 * abridged: the full result is in structuredContent only, so a 24 MiB message is not sent twice.
 */
const TEXT_MIRROR_MAX_CHARS = 64 * 1024;
/** In an abridged text item, each longer string (a message's text or html) keeps this many characters. */
const ABRIDGED_STRING_CHARS = 2000;

/**
 * The tool result of each result object, built once: waits that end alike share one result object
 * (SharedResults), and so share one tool result, which the blocking-call responder serialises once.
 */
const toolResults = new WeakMap<object, CallToolResult>();

function success(data: object): CallToolResult {
  let result = toolResults.get(data);
  if (!result) {
    result = {
      content: [{ type: 'text', text: textMirror(data) }],
      structuredContent: data as Record<string, unknown>,
    };
    toolResults.set(data, result);
  }
  return result;
}

/**
 * The text item of a result: its JSON, or for a large result a short note followed by the JSON with
 * every long string cut to its beginning (the fields stay, so a client that reads only the text
 * still sees what the result is and where the rest is).
 */
function textMirror(data: object): string {
  const json = JSON.stringify(data);
  if (json.length <= TEXT_MIRROR_MAX_CHARS) return json;
  const abridged = JSON.stringify(data, (_key, value: unknown) =>
    typeof value === 'string' && value.length > ABRIDGED_STRING_CHARS
      ? `${value.slice(0, ABRIDGED_STRING_CHARS)}… [${value.length} characters in all; see structuredContent]`
      : value,
  );
  return (
    `This result is ${json.length} characters of JSON, too large to repeat here: structuredContent has all ` +
    `of it. Abridged (long strings cut): ${abridged}`
  );
}

function failure(err: AlcartaError): CallToolResult {
  const body = err.toBody();
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: body };
}
