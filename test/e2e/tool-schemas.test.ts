import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { rawMcp } from '../support/mcp';
import { startTestServer, TestServer } from '../support/test-server';

const REVISIONS = ['2025-11-25', '2025-06-18', '2025-03-26'];
const COMBINATORS = ['oneOf', 'anyOf', 'allOf'];

/** Every place in `schema` (at any depth) that uses a combinator, as JSON paths. */
function combinators(schema: unknown, path = '$'): string[] {
  if (Array.isArray(schema)) return schema.flatMap((item, i) => combinators(item, `${path}[${i}]`));
  if (schema === null || typeof schema !== 'object') return [];
  return Object.entries(schema).flatMap(([key, value]) => [
    ...(COMBINATORS.includes(key) ? [`${path}.${key}`] : []),
    ...combinators(value, `${path}.${key}`),
  ]);
}

/**
 * docs/operators.md "Limits and hardening": no inputSchema uses oneOf/anyOf/allOf at any level, at
 * any supported revision. Some clients (LangChain's MCP adapters) merge the variants of such
 * schemas and then reject every call.
 */
describe('tool input schemas', () => {
  let server: TestServer;

  before(async () => {
    server = await startTestServer();
  });

  after(async () => {
    await server?.close();
  });

  it('the walker finds combinators at any depth', () => {
    assert.deepEqual(combinators({ properties: { a: { items: [{ anyOf: [] }] } }, allOf: [] }), [
      '$.properties.a.items[0].anyOf',
      '$.allOf',
    ]);
  });

  for (const revision of REVISIONS) {
    it(`no tool uses oneOf/anyOf/allOf at ${revision}`, async () => {
      const res = await rawMcp(
        server.url,
        server.adminToken,
        { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
        { 'mcp-protocol-version': revision },
      );
      const tools = res.json?.result?.tools as Array<{ name: string; inputSchema: unknown }>;
      assert.ok(tools?.length >= 10, `the admin token sees every tool: ${res.text.slice(0, 200)}`);
      for (const tool of tools) assert.deepEqual(combinators(tool.inputSchema), [], `${tool.name} at ${revision}`);
      const event = (tools.find((t) => t.name === 'email_await')!.inputSchema as any).properties.event;
      assert.equal(event.type, 'object');
      assert.deepEqual(event.properties.type.enum, ['message_received', 'request_state_changed']);
    });
  }
});
