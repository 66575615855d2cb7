import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

interface MessageResult {
  matched: boolean;
  timed_out: boolean;
  shutdown: boolean;
  events: Array<{ message_id: string }>;
  next_cursor: string;
}

/** Waits of each kind parked at once: enough that one commit wakes many alike. */
const EACH = 10;
/** Long enough for any wake-up on a busy machine; the waits that must not match are cancelled. */
const BLOCK = 50;

/**
 * One commit wakes many parked waits of one mailbox at once: those that end alike share a result
 * (the engine builds and serialises it once), yet each wait gets exactly what its own position,
 * filters and token allow.
 */
describe('wait fan-out', () => {
  let server: TestServer;
  let everywhere: Client; // mail:read on every mailbox
  let boundHere: Client; // mail:read on the fan-out mailbox only
  let boundElsewhere: Client; // mail:read on another mailbox only
  let ingester: TestServer['admin'];
  let mailbox: string;

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_RATE_LIMIT_PER_SECOND: '0' } });
    mailbox = await createMailbox(server.admin);
    const other = await createMailbox(server.admin);
    const client = async (mailboxes: string[]) =>
      connectMcp(server.url, (await createToken(server.admin, { scopes: ['mail:read'], mailboxes })).secret);
    [everywhere, boundHere, boundElsewhere] = await Promise.all([client(['*']), client([mailbox]), client([other])]);
    const ingestToken = await createToken(server.admin, { scopes: ['mail:ingest'], mailboxes: ['*'] });
    ingester = server.admin.withToken(ingestToken.secret);
  });

  after(async () => {
    await Promise.all([everywhere, boundHere, boundElsewhere].map((c) => c?.close()));
    await server?.close();
  });

  it('waits with different positions, filters and tokens woken by one commit each get exactly their matches', async () => {
    /** The position after the newest message now (a wait without since_cursor starts there). */
    const endOf = async () =>
      (
        await callOk<MessageResult>(everywhere, 'email_await', {
          event: { type: 'message_received', mailbox_id: mailbox },
          timeout_seconds: 0,
        })
      ).next_cursor;
    const start = await endOf();
    await ingest(ingester, mailbox, { from: 'noise@example.org', subject: 'weekly digest' });
    const afterFirst = await endOf();
    await ingest(ingester, mailbox, { from: 'noise@example.org', subject: 'monthly digest' });
    const atEnd = await endOf();

    const wait = (client: Client, event: Record<string, unknown>, since?: string, signal?: AbortSignal) =>
      client.callTool(
        {
          name: 'email_await',
          arguments: {
            event: { type: 'message_received', ...event },
            timeout_seconds: BLOCK,
            ...(since !== undefined && { since_cursor: since }),
          },
        },
        undefined,
        { signal, timeout: (BLOCK + 30) * 1000 },
      ) as Promise<CallToolResult>;
    const times = <T>(make: () => T) => Array.from({ length: EACH }, make);
    const matching = [
      // No filter, from the end.
      ...times(() => wait(everywhere, { mailbox_id: mailbox }, atEnd)),
      // A sender filter from the start: the noise before is passed over.
      ...times(() => wait(everywhere, { mailbox_id: mailbox, from: 'Alice@Example.org' }, start)),
      // Every mailbox of a token bound to this one, from the middle, by subject.
      ...times(() => wait(boundHere, { subject_contains: 'INVOICE' }, afterFirst)),
      // No since_cursor: from the newest message now.
      ...times(() => wait(everywhere, { mailbox_id: mailbox, subject_contains: 'invoice' })),
    ];
    // One controller per call: a client's signal is watched by each request it is given to.
    const cancels: AbortController[] = [];
    const cancellable = () => cancels[cancels.push(new AbortController()) - 1].signal;
    const notMatching = [
      // Another sender.
      ...times(() => wait(everywhere, { mailbox_id: mailbox, from: 'carol@example.org' }, atEnd, cancellable())),
      // A verified From (a JSON ingest is never verified).
      ...times(() => wait(boundHere, { mailbox_id: mailbox, from_verified: true }, undefined, cancellable())),
      // Every mailbox of a token that cannot see this one.
      ...times(() => wait(boundElsewhere, {}, undefined, cancellable())),
    ];
    const all = matching.length + notMatching.length;
    await waitFor(`${all} parked waits`, async () => (await activeWaits(server.url, 'message')) === all);

    const invoice = await ingest(ingester, mailbox, { from: 'alice@example.org', subject: 'Invoice 9' });
    const results = (await Promise.all(matching)).map((r) => {
      assert.notEqual(r.isError, true, JSON.stringify(r.structuredContent));
      assert.deepEqual(JSON.parse((r.content[0] as { text: string }).text), r.structuredContent);
      return r.structuredContent as unknown as MessageResult;
    });
    for (const r of results) {
      assert.deepEqual(
        { ...r, events: r.events.map((e) => e.message_id) },
        { matched: true, timed_out: false, shutdown: false, events: [invoice], next_cursor: r.next_cursor },
      );
    }
    // Wherever it started, each ends right after the invoice, with nothing after it.
    assert.equal(new Set(results.map((r) => r.next_cursor)).size, 1, 'one position after the commit');
    const resumed = await callOk<MessageResult>(everywhere, 'email_await', {
      event: { type: 'message_received', mailbox_id: mailbox },
      timeout_seconds: 0,
      since_cursor: results[0].next_cursor,
    });
    assert.deepEqual(resumed.events, []);
    assert.equal(resumed.next_cursor, await endOf());

    // The others saw the commit too, and are still waiting for theirs.
    assert.equal(await activeWaits(server.url, 'message'), notMatching.length);
    for (const c of cancels) c.abort();
    await Promise.allSettled(notMatching);
    await waitFor('the cancelled waits to end', async () => (await activeWaits(server.url, 'message')) === 0);
  });
});
