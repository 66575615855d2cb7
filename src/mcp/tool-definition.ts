import { z } from 'zod';
import { Caller } from '../kernel/caller';
import { Scope } from '../kernel/scopes';
import { TaskView } from '../tasks/task.service';
import { ProtocolRevision } from './protocol-revision';

export interface ToolContext {
  caller: Caller;
  revision: ProtocolRevision;
  /** Aborted when the client cancels the request or its connection closes. */
  signal: AbortSignal;
  /** Sends `notifications/progress`; present only when the request carried a progressToken. */
  progress?: (progress: number, message: string) => Promise<void>;
}

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/**
 * One MCP tool: its contract (name, description, argument schema), who may call it, and a thin
 * handler that calls one service. Handlers return the structured result or throw AlcartaError.
 */
export interface ToolDefinition<Args extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: Args;
  /** Any one of these scopes allows the tool; empty means every token may use it. */
  scopes: readonly Scope[];
  annotations?: ToolAnnotations;
  /** The call may block for a long time (a wait); see BlockingCallResponder. */
  blocking?: boolean;
  handle(args: z.output<Args>, ctx: ToolContext): Promise<object>;
  /**
   * Runs the call as an MCP task (revision 2025-11-25; the tool lists `taskSupport: "optional"`).
   * Throws AlcartaError for the same mistakes `handle` would report.
   */
  task?(args: z.output<Args>, ctx: ToolContext, ttlMs: number | undefined): Promise<TaskView>;
}

/** Keeps the argument type of `handle` tied to the schema. */
export function defineTool<Args extends z.ZodObject>(tool: ToolDefinition<Args>): ToolDefinition {
  return tool;
}

/** Token providers of tool lists; the catalog gathers every provider registered under it. */
export const TOOL_PROVIDERS = Symbol('TOOL_PROVIDERS');

export interface ToolProvider {
  tools(): ToolDefinition[];
}
