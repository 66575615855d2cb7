import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OPERATOR } from '#app/kernel/caller.js';
import { BlockingCallResponder } from '#app/mcp/blocking-call.responder.js';
import type { Request } from 'express';
import { activeWaits } from '../support/metrics';
import { sseMessages } from '../support/mcp';
import { callOk2026, connectMcp2026, envelope, revision2026Headers } from '../support/mcp-2026';
import { createMailbox, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** `Mcp-Name` in the SEP-2243 Base64 form: the v2 SDK decodes it; the fast path leaves such calls to the SDK. */
const encodedName = (name: string) => `=?base64?${Buffer.from(name).toString('base64')}?=`;

interface RawCall {
  /** Whether the response headers arrived yet. */
  headed(): boolean;
  /** The HTTP status and the stream's text once it ended, with the JSON-RPC messages in it. */
  done: Promise<{ status: number; text: string; messages: any[] }>;
}

/**
 * docs/operators.md "Capacity", at 2026-07-28: plain calls of blocking tools skip the v2 SDK's
 * per-request objects (BlockingCallResponder, as at 2025-11-25) so that a parked wait costs no more
 * memory than at 2025-11-25. What a client sees must not change: the answers are JSON-equal to the
 * ones the SDK gives for the same call, compared with calls the fast path leaves to the SDK (an
 * encoded `Mcp-Name`); refusals come from the SDK; calls that declare the Tasks extension go to the
 * SDK.
 */
describe('2026-07-28 blocking calls on the fast path', () => {
  let server: TestServer;
  let token: string;
  let mailboxId: string;

  /** A raw 2026-07-28 tools/call, its answer read to the end of the stream. */
  const call = (
    baseUrl: string,
    params: Record<string, unknown>,
    headers: Record<string, string> = revision2026Headers('tools/call', params.name as string),
    capabilities: Record<string, unknown> = {},
  ): RawCall => {
    let headed = false;
    const done = fetch(new URL('/mcp', baseUrl), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
        ...headers,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 21,
        method: 'tools/call',
        params: { ...params, _meta: { ...(params._meta as object), ...envelope(capabilities) } },
      }),
    }).then(async (res) => {
      headed = true;
      const text = await res.text();
      const messages = text.startsWith('{') ? [JSON.parse(text)] : sseMessages(text);
      return { status: res.status, text, messages };
    });
    return { headed: () => headed, done };
  };

  const awaitMail = (timeoutSeconds: number, mailbox = mailboxId) => ({
    name: 'email_await',
    arguments: { event: { type: 'message_received', mailbox_id: mailbox }, timeout_seconds: timeoutSeconds },
  });
  /** The same call, left to the v2 SDK by the encoded form of its `Mcp-Name`. */
  const viaSdk = (params: { name: string }) => ({
    ...revision2026Headers('tools/call'),
    'mcp-name': encodedName(params.name),
  });

  before(async () => {
    // The longest keep-alive: the SDK's stream writes nothing (not even its headers) for 15 s
    // before the answer, so a call whose headers arrive at once while parked took the fast path.
    server = await startTestServer({ env: { ALCARTA_KEEPALIVE_SECONDS: '15' } });
    token = server.adminToken;
    mailboxId = await createMailbox(server.admin);
  });

  after(async () => {
    await server?.close();
  });

  it('a parked email_await gets its headers at once, and an answer JSON-equal to the v2 SDK one', async () => {
    const params = awaitMail(30);
    const fast = call(server.url, params);
    const sdk = call(server.url, params, viaSdk(params));
    await waitFor('both waits to park', async () => (await activeWaits(server.url)) === 2);
    await waitFor('the fast path to send its headers', () => fast.headed());
    assert.equal(sdk.headed(), false, 'the comparison call went through the SDK, which streams nothing yet');

    await ingest(server.admin, mailboxId, { subject: 'wake both' });
    const [fastAnswer, sdkAnswer] = await Promise.all([fast.done, sdk.done]);
    assert.equal(fastAnswer.status, 200);
    assert.equal(fastAnswer.messages.length, 1);
    assert.equal(fastAnswer.messages[0].result.structuredContent.matched, true);
    assert.equal(fastAnswer.messages[0].result.resultType, 'complete');
    assert.deepEqual(fastAnswer.messages[0].result._meta, {
      'io.modelcontextprotocol/serverInfo': { name: 'alcarta', title: 'Alcarta', version: '0.1.0' },
    });
    assert.deepEqual(fastAnswer.messages, sdkAnswer.messages);
  });

  it('timed-out waits and failing calls are answered JSON-equal to the v2 SDK too', async () => {
    for (const params of [
      awaitMail(0),
      // A tool error (the mailbox does not exist) and invalid arguments.
      { ...awaitMail(0), arguments: { event: { type: 'message_received', mailbox_id: 'mbx_nope' } } },
      { ...awaitMail(0), arguments: { event: { type: 'no_such_event' }, timeout_seconds: 0 } },
    ]) {
      const [fast, sdk] = await Promise.all([
        call(server.url, params).done,
        call(server.url, params, viaSdk(params)).done,
      ]);
      assert.equal(fast.status, 200);
      assert.equal(fast.messages.length, 1);
      assert.equal(fast.messages[0].id, 21);
      assert.equal(sdk.status, 200);
      assert.deepEqual(fast.messages, sdk.messages, JSON.stringify(params));
    }
  });

  it('the official v2 client (standard headers, envelope, progress token) reads the answers of the fast path', async () => {
    const client = await connectMcp2026(server.url, token);
    try {
      const waiting = callOk2026(client, 'email_await', awaitMail(30).arguments, { onprogress: () => undefined });
      await waitFor('the wait to park', async () => (await activeWaits(server.url)) === 1);
      await ingest(server.admin, mailboxId, { subject: 'for the v2 client' });
      const result = await waiting;
      assert.equal(result.matched, true);
      assert.equal(result.events.length, 1);
    } finally {
      await client.close();
    }
  });

  it('refusals of plain blocking calls still come from the v2 SDK', async () => {
    const params = awaitMail(0);
    const refused = async (headers: Record<string, string>, body = params, status = 400) => {
      const answer = await call(server.url, body, headers).done;
      assert.equal(answer.status, status, answer.text);
      return answer.messages[0].error.code as number;
    };
    // SEP-2243: the standard headers must be there and agree with the body (-32020 HeaderMismatch).
    assert.equal(await refused(revision2026Headers('tools/call', 'monitor_inbox')), -32020);
    assert.equal(await refused(revision2026Headers('tools/call')), -32020);
    assert.equal(await refused(revision2026Headers('tools/list', 'email_await')), -32020);
    assert.equal(await refused({ 'mcp-method': 'tools/call', 'mcp-name': 'email_await' }), -32020);
    // Params that are not a CallToolRequest: -32602 from the SDK's server (on the call's stream).
    const notACall = { ...params, arguments: 'x' } as never;
    assert.equal(await refused(revision2026Headers('tools/call', 'email_await'), notACall, 200), -32602);
  });

  it('leaves calls whose client declares the Tasks extension to the v2 SDK (they may become tasks)', () => {
    const responder = server.running.app.get(BlockingCallResponder);
    const request = (capabilities: Record<string, unknown>) =>
      ({
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...revision2026Headers('tools/call', 'email_await'),
        },
        body: {
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { ...awaitMail(5), _meta: envelope(capabilities) },
        },
      }) as unknown as Request;
    assert.equal(responder.matchRevision20260728(request({}), OPERATOR)?.params.name, 'email_await');
    assert.equal(
      responder.matchRevision20260728(request({ extensions: { 'io.modelcontextprotocol/tasks': {} } }), OPERATOR),
      undefined,
    );
  });

  it('with a progressToken, progress and `: keepalive` come as the v2 SDK sends them', async () => {
    const quick = await startTestServer({ adminToken: token, env: { ALCARTA_KEEPALIVE_SECONDS: '1' } });
    try {
      const params = { ...awaitMail(3, await createMailbox(quick.admin)), _meta: { progressToken: 'p-1' } };
      const [fast, sdk] = await Promise.all([
        call(quick.url, params).done,
        call(quick.url, params, viaSdk(params)).done,
      ]);
      for (const answer of [fast, sdk]) {
        assert.match(answer.text, /^: keepalive$/m);
        assert.ok(answer.messages.length >= 2, `progress during a 3 s wait: ${answer.text}`);
      }
      // Progress counts and texts follow the clock; their shape must be the same.
      const shape = (m: any) =>
        m.method === 'notifications/progress'
          ? { ...m, params: { ...m.params, progress: typeof m.params.progress, message: typeof m.params.message } }
          : m;
      assert.deepEqual(shape(fast.messages[0]), shape(sdk.messages[0]));
      assert.equal(fast.messages[0].params.progressToken, 'p-1');
      assert.deepEqual(fast.messages.at(-1), sdk.messages.at(-1));
    } finally {
      await quick.close();
    }
  });
});
