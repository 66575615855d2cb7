import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { Caller } from '#app/kernel/caller.js';
import { McpModule } from '#app/mcp/mcp.module.js';
import { ALL_REVISIONS, ProtocolRevision } from '#app/mcp/protocol-revision.js';
import { ToolCatalog } from '#app/mcp/tool-catalog.js';
import { TOOL_PROVIDERS, ToolDefinition, ToolProvider } from '#app/mcp/tool-definition.js';
import { GENERATED_NOTE } from './markdown';

type ProviderClass = new (...args: never[]) => ToolProvider;

/**
 * The tool providers McpModule registers under TOOL_PROVIDERS. Built without their services: tool
 * definitions (names, descriptions, schemas) are plain data, and only the handlers, which never run
 * here, use the services.
 */
function toolProviders(): ToolProvider[] {
  const providers = (Reflect.getMetadata('providers', McpModule) ?? []) as unknown[];
  const entry = providers.find(
    (p): p is { provide: symbol; inject: ProviderClass[] } =>
      typeof p === 'object' && p !== null && (p as { provide?: unknown }).provide === TOOL_PROVIDERS,
  );
  if (!entry) throw new Error('McpModule registers no TOOL_PROVIDERS');
  return entry.inject.map((Provider) => new Provider());
}

/** docs/reference/tools.md: every tool as `tools/list` shows it to an admin token, per revision. */
export function toolsReference(): string {
  const providers = toolProviders();
  const definitions = providers.flatMap((p) => p.tools());
  const catalog = new ToolCatalog(providers, undefined as never);
  const admin = new Caller('tok_reference', new Set(['admin']), ['*']);
  const listings = new Map<ProtocolRevision, Map<string, Tool>>(
    ALL_REVISIONS.map((revision) => [revision, new Map(catalog.list(admin, revision).map((t) => [t.name, t]))]),
  );
  const lines = [
    '# MCP tools',
    '',
    GENERATED_NOTE('the tool catalog (`src/mcp/tool-catalog.ts` and the providers in `src/mcp/tools/`)'),
    '',
    `Alcarta serves the MCP revisions ${ALL_REVISIONS.map((r) => `\`${r}\``).join(', ')}. A token sees ` +
      'only the tools its scopes allow (`admin` allows every tool); a tool it may not use answers like one that ' +
      'does not exist. Every result carries `structuredContent`; errors are results with `isError: true` and ' +
      'a body `{error, reason, message, …}`.',
    '',
    '| Tool | Title | Scopes (any one) |',
    '| --- | --- | --- |',
    ...definitions.map((d) => `| [\`${d.name}\`](#${d.name}) | ${d.title} | ${scopeList(d)} |`),
    '',
  ];
  for (const definition of definitions) lines.push(...toolSection(definition, listings));
  return lines.join('\n');
}

function scopeList(definition: ToolDefinition): string {
  return definition.scopes.length > 0 ? definition.scopes.map((s) => `\`${s}\``).join(', ') : 'any token';
}

function toolSection(definition: ToolDefinition, listings: Map<ProtocolRevision, Map<string, Tool>>): string[] {
  const perRevision = ALL_REVISIONS.map((revision) => ({
    revision,
    tool: listings.get(revision)!.get(definition.name)!,
  }));
  const field = (tool: Tool, key: string) => (tool as unknown as Record<string, unknown>)[key];
  const [first] = perRevision;
  const lines = [
    `## ${definition.name}`,
    '',
    `**${definition.title}.** ${definition.description}`,
    '',
    `- Scopes: ${scopeList(definition)}`,
    `- Blocking (may wait a long time): ${definition.blocking ? 'yes' : 'no'}`,
    `- Runs as an MCP task: ${definition.task ? 'yes' : 'no'}`,
  ];
  if (first.tool.annotations) lines.push(`- Annotations: \`${JSON.stringify(first.tool.annotations)}\``);
  const keys = [...new Set(perRevision.flatMap(({ tool }) => Object.keys(tool)))].sort();
  for (const key of keys.filter(
    (k) => new Set(perRevision.map(({ tool }) => JSON.stringify(field(tool, k)))).size > 1,
  )) {
    lines.push(`- \`${key}\` by revision:`);
    for (const { revision, tool } of perRevision) {
      lines.push(
        `  - ${revision}: ${field(tool, key) === undefined ? 'absent' : `\`${JSON.stringify(field(tool, key))}\``}`,
      );
    }
  }
  lines.push('', 'Input schema:', '', '```json', JSON.stringify(first.tool.inputSchema, null, 2), '```');
  if (first.tool.outputSchema) {
    lines.push('', 'Output schema:', '', '```json', JSON.stringify(first.tool.outputSchema, null, 2), '```');
  }
  lines.push('');
  return lines;
}
