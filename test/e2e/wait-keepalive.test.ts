import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResult, ErrorCode, McpError, Progress } from '@modelcontextprotocol/sdk/types.js';
import { connectMcp } from '../support/mcp';
import { createMailbox, startTestServer, TestServer } from '../support/test-server';

/** The keep-alive interval of the server under test: 1 s instead of the default 10 s. */
const KEEPALIVE_SECONDS = 1;

interface Chunk {
  /** Milliseconds since the response headers arrived. */
  at: number;
  text: string;
}

/**
 * docs/agents.md "Tools": a tool call that may block answers as an SSE stream and keeps the
 * connection busy at least every keep-alive interval: `: keepalive` comments always,
 * `notifications/progress` too when the request carried a progressToken. Progress is what lets an
 * SDK client wait longer than its own request timeout (resetTimeoutOnProgress), which is why agents
 * pass onprogress.
 */
describe('keep-alive of blocking waits', () => {
  let server: TestServer;
  let token: string;
  let mailboxId: string;
  let client: Client;

  /** POSTs a blocking email_await as raw JSON-RPC and records every chunk of the SSE stream as it arrives. */
  const rawWait = async (timeoutSeconds: number, meta?: Record<string, unknown>) => {
    const res = await fetch(new URL('/mcp', server.url), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: {
          name: 'email_await',
          arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: timeoutSeconds },
          ...(meta ? { _meta: meta } : {}),
        },
      }),
    });
    const opened = Date.now();
    const chunks: Chunk[] = [];
    const decoder = new TextDecoder();
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push({ at: Date.now() - opened, text: decoder.decode(value, { stream: true }) });
    }
    const ended = Date.now() - opened;
    const stream = chunks.map((c) => c.text).join('');
    const messages = stream
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => JSON.parse(line.slice(6)) as { id?: number; method?: string; params?: any; result?: any });
    return { res, chunks, ended, stream, messages };
  };

  /** The longest silence on the stream: from the headers to the first chunk, between chunks, to the end. */
  const largestGap = (chunks: Chunk[], ended: number) => {
    const times = [0, ...chunks.map((c) => c.at), ended];
    return Math.max(...times.slice(1).map((t, i) => t - times[i]));
  };

  const assertTimedOut = (result: any) => {
    assert.equal(result.isError, undefined);
    const { next_cursor: nextCursor, ...rest } = result.structuredContent;
    assert.deepEqual(rest, { matched: false, timed_out: true, shutdown: false, events: [] });
    assert.equal(typeof nextCursor, 'string');
  };

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_KEEPALIVE_SECONDS: String(KEEPALIVE_SECONDS) } });
    mailboxId = await createMailbox(server.admin);
    token = server.adminToken;
    client = await connectMcp(server.url, token);
  });

  after(async () => {
    await client?.close();
    await server?.close();
  });

  it('answers as an SSE stream with a `: keepalive` comment every interval while it blocks, then the result', async () => {
    const { res, chunks, ended, stream, messages } = await rawWait(4);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);

    const comments = stream.split('\n').filter((line) => line === ': keepalive');
    assert.ok(comments.length >= 2, `expected keep-alive comments during a 4 s wait, got ${comments.length}`);
    const gap = largestGap(chunks, ended);
    // The interval is 1 s; 3 s of silence would already mean a missed keep-alive (the default is 10 s).
    assert.ok(gap < 3000, `the stream was silent for ${gap} ms`);

    assert.equal(messages.length, 1, 'no progress notifications without a progressToken');
    assert.equal(messages[0].id, 7);
    assertTimedOut(messages[0].result);
  });

  it('with a progressToken, sends increasing notifications/progress on the same stream, then the result', async () => {
    const { res, messages } = await rawWait(4, { progressToken: 'wait-progress-1' });
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);

    const progress = messages.filter((m) => m.method === 'notifications/progress');
    assert.ok(progress.length >= 2, `expected progress notifications during a 4 s wait, got ${progress.length}`);
    for (const note of progress) {
      assert.equal(note.params.progressToken, 'wait-progress-1');
      assert.equal(typeof note.params.progress, 'number');
    }
    const values = progress.map((n) => n.params.progress as number);
    for (let i = 1; i < values.length; i++) {
      assert.ok(values[i] > values[i - 1], `progress must increase: ${values.join(', ')}`);
    }

    const last = messages[messages.length - 1];
    assert.equal(last.id, 7, 'the result comes last');
    assertTimedOut(last.result);
  });

  it('an SDK client with onprogress + resetTimeoutOnProgress outlasts its request timeout', async () => {
    const seen: Progress[] = [];
    const result = (await client.callTool(
      {
        name: 'email_await',
        arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: 6 },
      },
      undefined,
      // Progress arrives every second, so a 3 s request timeout is reset well before it fires.
      { timeout: 3000, resetTimeoutOnProgress: true, onprogress: (p) => seen.push(p) },
    )) as CallToolResult;
    assertTimedOut(result);
    assert.ok(seen.length >= 3, `onprogress was called ${seen.length} times during a 6 s wait`);
  });

  it('the same call without onprogress fails with the SDK request timeout (-32001)', async () => {
    await assert.rejects(
      client.callTool(
        {
          name: 'email_await',
          arguments: { event: { type: 'message_received', mailbox_id: mailboxId }, timeout_seconds: 6 },
        },
        undefined,
        { timeout: 3000 },
      ),
      (err: unknown) => {
        assert.ok(err instanceof McpError, String(err));
        assert.equal(err.code, ErrorCode.RequestTimeout);
        return true;
      },
    );
  });
});
