import { Injectable } from '@nestjs/common';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { ToolCatalog } from '../tool-catalog';
import { ToolContext } from '../tool-definition';
import { ClientCapabilities, declaresExtension } from './extension';
import { CreateTaskResult, TASKS_EXTENSION_ID, taskFields } from './tasks-extension';

/** The extensions offered at 2026-07-28 (Revision20260728Extension), gathered by the module. */
export const REVISION_2026_07_28_EXTENSIONS = Symbol('REVISION_2026_07_28_EXTENSIONS');

/**
 * A `tools/call` at 2026-07-28: the catalog's call, as at every revision; or, when the request's
 * client declared the Tasks extension and the tool can run as a task (the waits), a task
 * (CreateTaskResult) whose result `tasks/get` returns. A client that did not declare the extension
 * on this request never gets a task (SEP-2663), whatever it declared before.
 */
@Injectable()
export class Revision20260728ToolCalls {
  constructor(private readonly catalog: ToolCatalog) {}

  async call(
    name: string,
    args: unknown,
    ctx: ToolContext,
    capabilities: ClientCapabilities,
  ): Promise<CallToolResult | CreateTaskResult> {
    if (!declaresExtension(capabilities, TASKS_EXTENSION_ID) || !this.catalog.supportsTask(name, ctx.caller)) {
      return this.catalog.call(name, args, ctx);
    }
    const outcome = await this.catalog.callAsExtensionTask(name, args, ctx);
    // TaskService.start has committed the task: a tasks/get for it resolves on every replica.
    return 'task' in outcome ? { resultType: 'task', ...taskFields(outcome.task) } : outcome.result;
  }
}
