import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  argumentPaths,
  CONTENT_TYPES,
  Hostile,
  HOSTILE_PATH_IDS,
  HOSTILE_QUERY_VALUES,
  hostileBodies,
  hostileMessages,
  hostileValues,
  LEAKS,
  mutate,
  prng,
  SEED,
} from '../support/hostile-input';
import { callOk, connectMcp, rawMcp } from '../support/mcp';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';

/**
 * No input produces a 5xx (docs/operators.md, "Limits and hardening"), generated: every REST route
 * (docs/rest-api.md) and every MCP tool of tools/list, each field and position crossed with a list
 * of hostile values (NUL, lone surrogates, huge strings and numbers, wrong types, arrays for
 * objects, deep nesting, garbage and empty bodies, wrong content types, over-long headers,
 * impossible ids, hostile MIME). Every answer must be a 2xx or a 4xx with a reason, with no
 * internal detail, and no tool call may end in -32603.
 *
 * Deterministic: random strings and bytes come from a PRNG seeded with ALCARTA_HOSTILE_SEED
 * (default in support/hostile-input.ts), and every failure names its case, so a failing run
 * reproduces exactly.
 */
const CONCURRENCY = 6;

/** One request of the run. */
interface Case {
  label: string;
  surface: 'rest' | 'mcp';
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

interface Failure {
  label: string;
  problem: string;
}

/** Valid arguments of every tool, each call answering at once (timeout_seconds: 0). */
type Baselines = Record<string, Record<string, unknown>>;

describe('hostile input: no 5xx and no internals, over every route and tool', () => {
  let server: TestServer;
  let mailboxId: string;
  let messageId: string;
  let requestId: string;
  /** The agent that asks: requests are decided with the admin token, never by the credential that asked. */
  let agentToken: string;
  const random = prng(SEED);
  const values = hostileValues(random);
  let sent = 0;

  const json = (value: unknown) => JSON.stringify(value);
  const authorised = (headers: Record<string, string> = {}) => ({
    authorization: `Bearer ${server.adminToken}`,
    ...headers,
  });

  /** Sends one case and returns what is wrong with its answer, if anything. */
  async function check(c: Case): Promise<string | undefined> {
    sent++;
    let res: Response;
    try {
      res = await fetch(server.url + c.path, {
        method: c.method,
        headers: c.headers,
        body: c.body,
        signal: AbortSignal.timeout(20_000),
      });
    } catch (err) {
      return `no answer: ${(err as Error).message}`;
    }
    const text = await res.text();
    if (res.status >= 500) return `status ${res.status}: ${text.slice(0, 300)}`;
    // Also as it reads once unescaped: a dump inside a JSON string has its quotes and newlines escaped.
    const unescaped = text.replace(/\\"/g, '"').replace(/\\n/g, '\n');
    for (const [what, pattern] of LEAKS) {
      if (pattern.test(text) || pattern.test(unescaped)) return `${what} in the body: ${text.slice(0, 300)}`;
    }
    const contentType = res.headers.get('content-type') ?? '';
    const messages: any[] = [];
    if (contentType.includes('text/event-stream')) {
      for (const line of text.split('\n')) if (line.startsWith('data: ')) messages.push(JSON.parse(line.slice(6)));
    } else if (contentType.includes('json') && text) {
      messages.push(JSON.parse(text));
    }
    if (c.surface === 'rest') {
      const body = messages[0];
      if (res.status >= 400 && body && (typeof body.error !== 'string' || typeof body.reason !== 'string')) {
        return `a ${res.status} without error and reason: ${text.slice(0, 300)}`;
      }
      // The database's refusal (database-errors.ts) is a backstop: input must be checked before SQL.
      if (body?.reason === 'invalid_input') return `refused by the database, not by a check: ${text.slice(0, 300)}`;
      return undefined;
    }
    for (const m of messages) {
      if (m?.error?.code === -32603) return `JSON-RPC -32603: ${text.slice(0, 300)}`;
      if (m?.error && typeof m.error.message !== 'string') return `JSON-RPC error without a message: ${text}`;
      const result = m?.result;
      if (result?.isError) {
        const sc = result.structuredContent;
        if (typeof sc?.error !== 'string' || typeof sc?.reason !== 'string') {
          return `a tool error without error and reason: ${text.slice(0, 300)}`;
        }
      }
    }
    return undefined;
  }

  async function runAll(cases: Case[]): Promise<Failure[]> {
    const failures: Failure[] = [];
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const c = cases[next++];
        const problem = await check(c);
        if (problem) failures.push({ label: c.label, problem });
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    return failures;
  }

  const report = (failures: Failure[], total: number) => {
    if (failures.length === 0) return;
    assert.fail(
      `${failures.length} of ${total} requests failed (seed ${SEED}; ALCARTA_HOSTILE_SEED reproduces):\n` +
        failures
          .slice(0, 20)
          .map((f) => `  ${f.label}: ${f.problem}`)
          .join('\n'),
    );
  };

  /**
   * The values tried at one position: the core ones (unstorable text, wrong types, extremes, too
   * deep, absent) always, and a seeded sample of the others, which keeps the run short.
   */
  const CORE = [
    'date before PostgreSQL',
    'NUL inside',
    'lone high surrogate',
    'null',
    '1e308',
    '-1',
    '1.5',
    'empty array',
    'empty object',
    '100k string',
    'array 70 deep',
  ];
  const valuesFor = (): Hostile[] => [
    ...values.filter((v) => CORE.includes(v.label)),
    ...sample(
      values.filter((v) => !CORE.includes(v.label)),
      6,
    ),
    { label: 'absent', value: undefined },
  ];

  /** `count` of the items, picked by the seeded PRNG. */
  const sample = <T>(items: T[], count: number): T[] =>
    Array.from({ length: count }, () => items[Math.floor(random() * items.length)]);

  before(async () => {
    // Thousands of requests with one token, as fast as possible: rate limiting would refuse most of
    // them before they reach the code under test.
    server = await startTestServer({ env: { ALCARTA_RATE_LIMIT_PER_SECOND: '0' } });
    mailboxId = await createMailbox(server.admin);
    messageId = await ingest(server.admin, mailboxId, { subject: 'baseline' });
    agentToken = (await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [mailboxId] })).secret;
    const agent = await connectMcp(server.url, agentToken);
    requestId = (await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'baseline' })).request_id;
    await agent.close();
  });

  after(async () => {
    await server?.close();
  });

  it('REST JSON fields and query parameters × hostile values', async () => {
    let ingested = 0;
    // A new Message-ID each time: a duplicate would be answered before its fields reach the database.
    const ingestBase = () => ({
      from: 'sender@example.org',
      to: ['agent@example.com'],
      cc: ['cc@example.com'],
      subject: 'Hello',
      text: 'Body',
      html: '<p>Body</p>',
      message_id_header: `<base-${++ingested}@example.org>`,
      in_reply_to: '<parent@example.org>',
      received_at: '2025-01-01T00:00:00Z',
    });
    // A pending request per decision, so every valid mutation is stored rather than refused as 409.
    const pending: string[] = [];
    const agent = await connectMcp(server.url, agentToken);
    try {
      for (let i = 0; i < 20; i++) {
        const batch = Array.from({ length: 4 }, () =>
          callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'to decide' }),
        );
        for (const created of await Promise.all(batch)) pending.push(created.request_id as string);
      }
    } finally {
      await agent.close();
    }
    const decision = (action: string) => () => `/v1/requests/${pending.pop() ?? requestId}/${action}`;
    const routes: { method: string; path: () => string; base: () => Record<string, unknown> }[] = [
      { method: 'POST', path: () => `/v1/mailboxes/${mailboxId}/messages`, base: ingestBase },
      { method: 'POST', path: decision('approve'), base: () => ({ reason: 'ok' }) },
      { method: 'POST', path: decision('reject'), base: () => ({ reason: 'no' }) },
      {
        method: 'POST',
        path: () => '/v1/mailboxes',
        base: () => ({ address: `m-${randomUUID()}@example.com`, name: 'n' }),
      },
      {
        method: 'POST',
        path: () => '/v1/tokens',
        base: () => ({ name: 't', scopes: ['mail:read'], mailboxes: [mailboxId], expires_at: '2099-01-01T00:00:00Z' }),
      },
      {
        method: 'POST',
        path: () => '/v1/grants',
        base: () => ({ principal: 'group:ops', mailboxes: [mailboxId] }),
      },
    ];
    const cases: Case[] = [];
    for (const route of routes) {
      const fields = Object.keys(route.base());
      for (const field of [...fields, 'unknown_field']) {
        for (const v of valuesFor()) {
          const path = route.path();
          cases.push({
            label: `${route.method} ${path} ${field}=${v.label}`,
            surface: 'rest',
            method: route.method,
            path,
            headers: authorised({ 'content-type': 'application/json' }),
            body: json(mutate(route.base(), field, v.value)),
          });
        }
      }
      const path = route.path();
      for (const v of sample(values, 12)) {
        cases.push({
          label: `${route.method} ${path} body=${v.label}`,
          surface: 'rest',
          method: route.method,
          path,
          headers: authorised({ 'content-type': 'application/json' }),
          body: json(v.value),
        });
        // The value under a hostile key.
        cases.push({
          label: `${route.method} ${path} key \\u0000 / __proto__ = ${v.label}`,
          surface: 'rest',
          method: route.method,
          path,
          headers: authorised({ 'content-type': 'application/json' }),
          body: `{"\\u0000":${json(v.value)},"__proto__":${json(v.value)},"constructor":{"prototype":${json(v.value)}}}`,
        });
      }
    }
    for (const param of ['state', 'mailbox_id', 'limit', 'unknown']) {
      for (const value of HOSTILE_QUERY_VALUES) {
        for (const query of [
          `${param}=${value}`,
          ...sample([`${param}[]=${value}`, `${param}=${value}&${param}=1`], 1),
        ]) {
          cases.push({
            label: `GET /v1/requests?${query.slice(0, 60)}`,
            surface: 'rest',
            method: 'GET',
            path: `/v1/requests?${query}`,
            headers: authorised(),
          });
        }
      }
    }
    const failures = await runAll(cases);
    report(failures, cases.length);
  });

  it('path ids, raw bodies, content types and headers on every REST route', async () => {
    const cases: Case[] = [];
    const idRoutes: [string, (id: string) => string, string?][] = [
      ['DELETE', (id) => `/v1/tokens/${id}`],
      ['POST', (id) => `/v1/requests/${id}/approve`, '{}'],
      ['POST', (id) => `/v1/requests/${id}/reject`, '{"reason":"r"}'],
      [
        'POST',
        (id) => `/v1/mailboxes/${id}/messages`,
        json({ from: 'a@example.org', to: [], subject: 's', text: 't' }),
      ],
      ['GET', (id) => `/v1/mailboxes/${id}`],
      ['GET', (id) => `/v1/tokens/${id}`],
    ];
    for (const [method, path, body] of idRoutes) {
      for (const id of HOSTILE_PATH_IDS) {
        cases.push({
          label: `${method} ${path(id.slice(0, 40))}`,
          surface: 'rest',
          method,
          path: path(id),
          headers: authorised(body ? { 'content-type': 'application/json' } : {}),
          body,
        });
      }
    }
    const postRoutes = [
      `/v1/mailboxes/${mailboxId}/messages`,
      `/v1/requests/${requestId}/approve`,
      '/v1/mailboxes',
      '/v1/tokens',
      '/v1/grants',
    ];
    const bodies = hostileBodies(random);
    for (const path of postRoutes) {
      for (const contentType of CONTENT_TYPES) {
        for (const [label, body] of contentType === 'application/json' ? bodies : sample(bodies, 5)) {
          cases.push({
            label: `POST ${path} ${contentType} ${label}`,
            surface: 'rest',
            method: 'POST',
            path,
            headers: authorised({ 'content-type': contentType }),
            body,
          });
        }
      }
      cases.push({
        label: `POST ${path} no content type`,
        surface: 'rest',
        method: 'POST',
        path,
        headers: authorised(),
        body: '{}',
      });
      cases.push({
        label: `POST ${path} gzip garbage`,
        surface: 'rest',
        method: 'POST',
        path,
        headers: authorised({ 'content-type': 'application/json', 'content-encoding': 'gzip' }),
        body: Buffer.from('not gzip at all'),
      });
      cases.push({
        label: `POST ${path} unknown encoding`,
        surface: 'rest',
        method: 'POST',
        path,
        headers: authorised({ 'content-type': 'application/json', 'content-encoding': 'br, x-bogus' }),
        body: '{}',
      });
    }
    const everyRoute: [string, string][] = [
      ['GET', '/v1/mailboxes'],
      ['GET', '/v1/tokens'],
      ['GET', '/v1/grants'],
      ['DELETE', '/v1/grants/grt_%00'],
      ['GET', '/v1/requests'],
      ['GET', '/health/live'],
      ['GET', '/health/ready'],
      ['GET', '/metrics'],
      ['GET', '/v1/waits/ws?ticket=%00'],
      ['GET', '/mcp'],
      ['DELETE', '/mcp'],
      ['PUT', '/v1/tokens'],
      ['PATCH', '/v1/mailboxes'],
      ['OPTIONS', '/v1/tokens'],
      ['GET', '/%00'],
      ['GET', '/..%2F..%2Fetc%2Fpasswd'],
    ];
    const hostileHeaders: [string, Record<string, string>][] = [
      ['over-long header', { 'x-long': 'h'.repeat(40_000) }],
      ['over-long authorization', { authorization: `Bearer alc_${'x'.repeat(20_000)}` }],
      ['long authorization', { authorization: `Bearer alc_${'x'.repeat(4000)}` }],
      ['basic authorization', { authorization: 'Basic YTpi' }],
      ['empty bearer', { authorization: 'Bearer ' }],
      ['latin1 bearer', { authorization: 'Bearer alc_\u00ff\u00fe' }],
      ['wst bearer', { authorization: `Bearer wst_${'A'.repeat(43)}` }],
      ['no authorization', {}],
      ['500 headers', Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`x-h${i}`, 'v']))],
      ['bogus accept', authorised({ accept: '\u00ff/\u00fe' })],
      ['bogus forwarded', authorised({ 'x-forwarded-for': 'not an ip, %00, ::::', forwarded: 'for="[::1' })],
      ['bogus protocol version', authorised({ 'mcp-protocol-version': 'x'.repeat(300) })],
    ];
    for (const [method, path] of everyRoute) {
      for (const [label, headers] of hostileHeaders) {
        const surface = path === '/mcp' ? 'mcp' : 'rest';
        cases.push({ label: `${method} ${path} ${label}`, surface, method, path, headers });
      }
    }
    for (const [label, message] of hostileMessages(random)) {
      cases.push({
        label: `ingest message/rfc822 ${label}`,
        surface: 'rest',
        method: 'POST',
        path: `/v1/mailboxes/${mailboxId}/messages`,
        headers: authorised({ 'content-type': 'message/rfc822' }),
        body: message,
      });
    }
    const failures = await runAll(cases);
    report(failures, cases.length);
  });

  it('every tool of tools/list: each argument × hostile values, hostile keys, raw bodies on /mcp', async () => {
    const baselines: Baselines = {
      list_mailboxes: {},
      list_messages: { mailbox_id: mailboxId, limit: 5 },
      get_message: { message_id: messageId },
      send_email: { mailbox_id: mailboxId, to: ['a@example.org'], subject: 's', text: 't' },
      request_approval: { mailbox_id: mailboxId, title: 't' },
      get_request: { request_id: requestId },
      cancel_request: { request_id: 'chk_AAAAAAAAAAAAAAAAAAAAAA' },
      email_await: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: 0 },
      monitor_inbox: { mailbox_id: mailboxId, timeout_seconds: 0 },
      monitor_approval: { request_id: requestId, timeout_seconds: 0 },
    };
    const listed = await rawMcp(server.url, server.adminToken, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const tools = listed.json.result.tools as { name: string; inputSchema: any }[];
    assert.ok(tools.length >= 10);
    for (const tool of tools) assert.ok(baselines[tool.name], `no baseline arguments for the tool ${tool.name}`);

    let id = 0;
    const call = (label: string, name: string, args: unknown, protocol = '2025-11-25'): Case => ({
      label,
      surface: 'mcp',
      method: 'POST',
      path: '/mcp',
      headers: authorised({
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': protocol,
      }),
      body: json({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name, arguments: args } }),
    });
    const cases: Case[] = [];
    for (const tool of tools) {
      const base = baselines[tool.name];
      for (const path of argumentPaths(tool.inputSchema)) {
        for (const v of valuesFor()) {
          // Without timeout_seconds a wait would block for its default 30 s: not a hostile case.
          if (v.value === undefined && path === 'timeout_seconds') continue;
          cases.push(call(`${tool.name} ${path}=${v.label}`, tool.name, mutate(base, path, v.value)));
        }
      }
      // Hostile keys with a sample of the values (every value is tried at every argument above).
      for (const v of sample(values, 8)) {
        cases.push(call(`${tool.name} key \\u0000=${v.label}`, tool.name, { ...base, '\u0000': v.value }));
        cases.push(call(`${tool.name} key \\ud800=${v.label}`, tool.name, { ...base, '\ud800': v.value }));
        cases.push(
          call(`${tool.name} key __proto__=${v.label}`, tool.name, {
            ...base,
            ...JSON.parse(`{"__proto__":${json(v.value)}}`),
          }),
        );
      }
      // The task-augmented form of the tools that run as tasks, with a hostile argument.
      for (const v of values.filter((_, i) => i % 4 === 0)) {
        const args = mutate(base, Object.keys(base)[0] ?? 'x', v.value);
        const body = json({
          jsonrpc: '2.0',
          id: ++id,
          method: 'tools/call',
          params: { name: tool.name, arguments: args, task: { ttl: 60_000 } },
        });
        cases.push({ ...call(`${tool.name} as a task, ${v.label}`, tool.name, args), body });
      }
      // The older revisions take the same path.
      cases.push(
        call(
          `${tool.name} at 2025-03-26 NUL`,
          tool.name,
          mutate(base, Object.keys(base)[0] ?? 'x', '\u0000'),
          '2025-03-26',
        ),
      );
    }
    const rawHeaders = authorised({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    });
    for (const [label, body] of hostileBodies(random)) {
      cases.push({
        label: `/mcp body ${label}`,
        surface: 'mcp',
        method: 'POST',
        path: '/mcp',
        headers: rawHeaders,
        body,
      });
    }
    for (const [method, params] of [
      ['tasks/get', { taskId: '\u0000' }],
      ['tasks/get', { taskId: 'task_\ud800' }],
      ['tasks/get', { taskId: 'x'.repeat(100_000) }],
      ['tasks/result', { taskId: '\u0000' }],
      ['tasks/cancel', { taskId: '../..' }],
      ['tasks/list', { cursor: '\u0000' }],
      ['tasks/list', { cursor: `tc1.${Buffer.from('["2020-01-01T00:00:00Z","task_\\u0000"]').toString('base64url')}` }],
      [
        'tasks/list',
        { cursor: `tc1.${Buffer.from('[' + '['.repeat(5000) + ']'.repeat(5000) + ']').toString('base64url')}` },
      ],
      ['ping', { _meta: { '\u0000': '\ud800' } }],
      ['\u0000', {}],
      ['x'.repeat(10_000), {}],
    ] as [string, unknown][]) {
      cases.push({
        label: `/mcp ${method.slice(0, 20)} ${JSON.stringify(params).slice(0, 60)}`,
        surface: 'mcp',
        method: 'POST',
        path: '/mcp',
        headers: authorised({
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
        }),
        body: json({ jsonrpc: '2.0', id: ++id, method, params }),
      });
    }
    const failures = await runAll(cases);
    report(failures, cases.length);
  });

  it('JSON-RPC method params answer -32602, never -32603', async () => {
    const cases: Case[] = [];
    const headers = authorised({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
    });
    const bodies: [string, unknown][] = [
      ['tools/call arguments null', { method: 'tools/call', params: { name: 'list_mailboxes', arguments: null } }],
      ['tools/call arguments array', { method: 'tools/call', params: { name: 'list_mailboxes', arguments: [] } }],
      ['tools/call arguments string', { method: 'tools/call', params: { name: 'list_mailboxes', arguments: 'x' } }],
      ['tools/call name 5', { method: 'tools/call', params: { name: 5 } }],
      ['tools/call params {}', { method: 'tools/call', params: {} }],
      [
        'tools/call task.ttl "30"',
        { method: 'tools/call', params: { name: 'monitor_inbox', arguments: {}, task: { ttl: '30' } } },
      ],
      [
        'initialize protocolVersion 5',
        {
          method: 'initialize',
          params: { protocolVersion: 5, capabilities: {}, clientInfo: { name: 'x', version: '1' } },
        },
      ],
    ];
    for (const [label, body] of bodies) {
      cases.push({
        label,
        surface: 'mcp',
        method: 'POST',
        path: '/mcp',
        headers,
        body: json({ jsonrpc: '2.0', id: 1, ...(body as object) }),
      });
    }
    report(await runAll(cases), cases.length);
  });

  it('afterwards the server still serves ordinary requests', async (t) => {
    t.diagnostic(`${sent} hostile requests (seed ${SEED})`);
    assert.ok(sent > 1000, `only ${sent} hostile requests were sent`);
    assert.equal((await server.admin.get('/v1/tokens')).status, 200);
    const id = await ingest(server.admin, mailboxId, { subject: 'after the storm' });
    const agent = await connectMcp(server.url, server.adminToken);
    try {
      assert.equal((await callOk(agent, 'get_message', { message_id: id })).subject, 'after the storm');
    } finally {
      await agent.close();
    }
    assert.equal((await fetch(`${server.url}/health/ready`)).status, 200);
  });
});
