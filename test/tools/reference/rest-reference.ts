import type { OpenAPIObject, OperationObject, ParameterObject, ResponseObject } from '@nestjs/swagger';
import { cell, GENERATED_NOTE } from './markdown';

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** docs/reference/rest.md: the OpenAPI document of /openapi.json, as a page to read. */
export function restReference(document: OpenAPIObject): string {
  const operations = Object.entries(document.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ path, method, operation: item[method]! })),
  );
  const lines = [
    '# REST API',
    '',
    GENERATED_NOTE('the OpenAPI document the server serves at `/openapi.json` (`docs/reference/openapi.json`)'),
    '',
    document.info.description ?? '',
    '',
    'Protected routes take `Authorization: Bearer <token>`. Errors are JSON: `{"error", "reason", "message", …}` ' +
      '(schema `Error` below).',
    '',
    '| Method | Path | Summary |',
    '| --- | --- | --- |',
    ...operations.map(
      ({ path, method, operation }) =>
        `| ${method.toUpperCase()} | [\`${path}\`](#${anchor(method, path)}) | ${cell(operation.summary ?? '')} |`,
    ),
    '',
  ];
  for (const { path, method, operation } of operations) lines.push(...operationSection(method, path, operation));
  lines.push('## Schemas', '');
  for (const [name, schema] of Object.entries(document.components?.schemas ?? {})) {
    lines.push(`### ${name}`, '', '```json', JSON.stringify(schema, null, 2), '```', '');
  }
  return lines.join('\n');
}

/** The heading's anchor as GitHub computes it. */
function anchor(method: string, path: string): string {
  return `${method} ${path}`
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');
}

function operationSection(method: string, path: string, operation: OperationObject): string[] {
  const lines = [`## ${method.toUpperCase()} ${path}`, '', `**${operation.summary ?? ''}.**`, ''];
  if (operation.description) lines.push(operation.description, '');
  const parameters = (operation.parameters ?? []) as ParameterObject[];
  if (parameters.length > 0) {
    lines.push('| Parameter | In | Required | Schema | Description |', '| --- | --- | --- | --- | --- |');
    for (const p of parameters) {
      lines.push(
        `| \`${p.name}\` | ${p.in} | ${p.required ? 'yes' : 'no'} | \`${cell(JSON.stringify(p.schema ?? {}))}\` | ${cell(p.description ?? '')} |`,
      );
    }
    lines.push('');
  }
  const body = operation.requestBody as { content?: Record<string, { schema?: unknown }> } | undefined;
  for (const [type, media] of Object.entries(body?.content ?? {})) {
    lines.push(`Request body (\`${type}\`): ${schemaText(media.schema)}`, '');
  }
  lines.push('| Status | Meaning | Body |', '| --- | --- | --- |');
  for (const [status, response] of Object.entries(operation.responses)) {
    const { description, content } = response as ResponseObject;
    const bodies = Object.entries(content ?? {}).map(([type, media]) => `${type}: ${schemaText(media.schema)}`);
    lines.push(`| ${status} | ${cell(description)} | ${cell(bodies.join('; ') || '—')} |`);
  }
  lines.push('');
  return lines;
}

function schemaText(schema: unknown): string {
  const ref = (schema as { $ref?: string } | undefined)?.$ref;
  if (ref) {
    const name = ref.replace('#/components/schemas/', '');
    return `[${name}](#${name.toLowerCase()})`;
  }
  return `\`${JSON.stringify(schema ?? {})}\``;
}
