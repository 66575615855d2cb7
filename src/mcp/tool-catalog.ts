import { Inject, Injectable, Logger } from '@nestjs/common';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Caller } from '../auth/caller';
import { AlcartaError, invalidRequest } from '../common/errors';
import { TOOL_PROVIDERS, ToolContext, ToolDefinition, ToolProvider } from './tool-definition';

interface CatalogEntry {
  definition: ToolDefinition;
  /** The `tools/list` entry, built once at start: it is the same for every request. */
  listing: Tool;
}

/**
 * All tools, each shown only to tokens whose scopes allow it. Validates arguments with the tool's
 * schema and turns every outcome into a CallToolResult with `structuredContent` (SPEC §3.1).
 */
@Injectable()
export class ToolCatalog {
  private readonly logger = new Logger(ToolCatalog.name);
  private readonly entries: ReadonlyMap<string, CatalogEntry>;

  constructor(@Inject(TOOL_PROVIDERS) providers: ToolProvider[]) {
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

  list(caller: Caller): Tool[] {
    return [...this.entries.values()].filter((e) => caller.hasAnyScope(e.definition.scopes)).map((e) => e.listing);
  }

  isBlocking(name: string, caller: Caller): boolean {
    const entry = this.entries.get(name);
    return !!entry?.definition.blocking && caller.hasAnyScope(entry.definition.scopes);
  }

  /** Tools the token may not use are reported exactly like tools that do not exist. */
  async call(name: string, rawArgs: unknown, ctx: ToolContext): Promise<CallToolResult> {
    const entry = this.entries.get(name);
    if (!entry || !ctx.caller.hasAnyScope(entry.definition.scopes)) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
    try {
      const args = parseArguments(entry.definition, rawArgs ?? {});
      return success(await entry.definition.handle(args, ctx));
    } catch (err) {
      if (err instanceof AlcartaError) return failure(err);
      this.logger.error(err instanceof Error ? err : String(err));
      throw new McpError(ErrorCode.InternalError, 'Internal error');
    }
  }
}

function parseArguments(tool: ToolDefinition, raw: unknown): Record<string, unknown> {
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

function success(data: object): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(data) }],
    structuredContent: data as Record<string, unknown>,
  };
}

function failure(err: AlcartaError): CallToolResult {
  const body = err.toBody();
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }], structuredContent: body };
}
