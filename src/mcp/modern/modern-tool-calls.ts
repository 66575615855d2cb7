import { Injectable } from '@nestjs/common';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { ToolCatalog } from '../tool-catalog';
import { ToolContext } from '../tool-definition';
import { ClientCapabilities } from './modern-extension';

/** The extensions offered at 2026-07-28 (ModernExtension), gathered by the module. */
export const MODERN_EXTENSIONS = Symbol('MODERN_EXTENSIONS');

/** A `tools/call` at 2026-07-28: the catalog's call, as at every revision. */
@Injectable()
export class ModernToolCalls {
  constructor(private readonly catalog: ToolCatalog) {}

  call(name: string, args: unknown, ctx: ToolContext, _capabilities: ClientCapabilities): Promise<CallToolResult> {
    return this.catalog.call(name, args, ctx);
  }
}
