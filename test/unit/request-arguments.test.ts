import 'reflect-metadata';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Test, TestingModule } from '@nestjs/testing';
import type { JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Caller } from '#app/kernel/caller.js';
import { invalidParams } from '#app/mcp/request-params.js';
import { defineTool, TOOL_PROVIDERS, ToolContext, ToolProvider } from '#app/mcp/tool-definition.js';
import { ToolCatalog } from '#app/mcp/tool-catalog.js';
import { TaskService } from '#app/tasks/task.service.js';

const call = (params: Record<string, unknown>): JSONRPCRequest => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params,
});

describe('JSON-RPC params of a request (-32602 before the SDK sees it)', () => {
  it('valid params, and methods this server does not answer, have no problem', () => {
    assert.equal(invalidParams(call({ name: 'list_mailboxes', arguments: {} }), '2025-06-18'), undefined);
    assert.equal(invalidParams({ jsonrpc: '2.0', id: 1, method: 'resources/list' }, '2025-11-25'), undefined);
  });

  it('says where and what is wrong, in short', () => {
    assert.match(invalidParams(call({ name: 7 }), '2025-06-18')!, /^Invalid params: params\.name: /);
    const many = invalidParams(
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1, capabilities: 2, clientInfo: 3 } },
      '2025-06-18',
    )!;
    assert.match(many, /^Invalid params: /);
    assert.ok(many.length < 3 * 200 + 100, 'at most three issues, each cut short');
  });

  it('tasks/* are checked at the tasks revision only (before it they do not exist)', () => {
    const get = { jsonrpc: '2.0' as const, id: 1, method: 'tasks/get', params: { taskId: 5 } };
    assert.match(invalidParams(get, '2025-11-25')!, /params\.taskId/);
    assert.equal(invalidParams(get, '2025-06-18'), undefined);
  });

  it('a task ttl must be a positive integer of milliseconds', () => {
    for (const ttl of [0, -1, 1.5]) {
      assert.equal(
        invalidParams(call({ name: 'email_await', arguments: {}, task: { ttl } }), '2025-11-25'),
        'Invalid params: params.task.ttl: must be a positive integer (milliseconds)',
        String(ttl),
      );
    }
    assert.equal(
      invalidParams(call({ name: 'email_await', arguments: {}, task: { ttl: 60000 } }), '2025-11-25'),
      undefined,
    );
    assert.match(
      invalidParams(call({ name: 'email_await', arguments: {}, task: { ttl: '60000' } }), '2025-11-25')!,
      /^Invalid params: params\.task\.ttl: /,
      'a string is not a number (the SDK schema says so)',
    );
  });
});

/** A tool with one required and one optional argument, answering with what it was given. */
class EchoTools implements ToolProvider {
  tools() {
    return [
      defineTool({
        name: 'echo',
        title: 'Echo',
        description: 'Returns its arguments.',
        input: z.object({ text: z.string().max(5), times: z.number().int().min(1).default(1) }).strict(),
        scopes: ['mail:read'],
        handle: (args) => Promise.resolve(args),
      }),
    ];
  }
}

describe('tool arguments (ToolCatalog)', () => {
  let moduleRef: TestingModule;
  let catalog: ToolCatalog;
  const ctx: ToolContext = {
    caller: new Caller('tok_a', new Set(['mail:read']), ['*']),
    revision: '2025-06-18',
    signal: new AbortController().signal,
  };

  before(async () => {
    moduleRef = await Test.createTestingModule({
      providers: [
        ToolCatalog,
        EchoTools,
        { provide: TOOL_PROVIDERS, inject: [EchoTools], useFactory: (...providers: ToolProvider[]) => providers },
        // Plain calls never start tasks.
        { provide: TaskService, useValue: {} },
      ],
    }).compile();
    catalog = moduleRef.get(ToolCatalog);
  });

  after(() => moduleRef.close());

  async function refusal(args: unknown): Promise<Record<string, unknown>> {
    const result = await catalog.call('echo', args, ctx);
    assert.equal(result.isError, true, JSON.stringify(result));
    return result.structuredContent!;
  }

  it('valid arguments reach the handler with defaults applied; no arguments count as {}', async () => {
    const result = await catalog.call('echo', { text: 'hi' }, ctx);
    assert.deepEqual(result.structuredContent, { text: 'hi', times: 1 });
    assert.equal((await refusal(undefined)).reason, 'missing_argument');
  });

  it('missing, invalid and unknown arguments are invalid_request tool errors naming the argument', async () => {
    assert.deepEqual(
      [await refusal({}), await refusal({ text: 'too long' }), await refusal({ text: 'hi', colour: 'red' })].map(
        (body) => [body.error, body.reason, body.argument],
      ),
      [
        ['invalid_request', 'missing_argument', 'text'],
        ['invalid_request', 'invalid_argument', 'text'],
        ['invalid_request', 'unknown_argument', 'colour'],
      ],
    );
  });

  it('text PostgreSQL cannot store is refused before the handler runs', async () => {
    const body = await refusal({ text: 'a\u0000b' });
    assert.equal(body.error, 'invalid_request');
    assert.equal(body.argument, 'text');
  });

  it('a tool the token may not use is reported like one that does not exist', async () => {
    const outsider = { ...ctx, caller: new Caller('tok_b', new Set(['approvals:read']), ['*']) };
    await assert.rejects(catalog.call('echo', { text: 'hi' }, outsider), /Unknown tool: echo/);
    await assert.rejects(catalog.call('nope', {}, ctx), /Unknown tool: nope/);
  });
});
