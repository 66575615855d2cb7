import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callOk, connectMcp } from '../support/mcp';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';

/**
 * docs/agents.md "Waits" cursors: resuming from a cursor never skips and never repeats a committed
 * message, also when many writers commit out of order. Eight writers ingest into one mailbox while
 * a reader pages with list_messages + since_cursor; the reader must see every message exactly once.
 */
describe('message cursor under concurrent writers', () => {
  let server: TestServer;
  let reader: Client;
  let ingestClient: TestServer['admin'];
  let token: string;

  before(async () => {
    // Writers ingest hundreds of messages as fast as they can with one token: a stress test of the
    // cursor, not of the rate limit (test/e2e/rate-limits.test.ts), which is off here.
    server = await startTestServer({ env: { ALCARTA_DB_POOL_SIZE: '12', ALCARTA_RATE_LIMIT_PER_SECOND: '0' } });
    token = (await createToken(server.admin, { scopes: ['mail:read', 'mail:ingest'], mailboxes: ['*'] })).secret;
    ingestClient = server.admin.withToken(token);
    reader = await connectMcp(server.url, token);
  });

  after(async () => {
    await reader?.close();
    await server?.close();
  });

  for (let round = 1; round <= 3; round++) {
    it(`round ${round}: 8 writers × 30 messages, paging reader sees each exactly once`, async () => {
      const mailboxId = await createMailbox(server.admin);
      const writers = 8;
      const perWriter = 30;
      const ingested = new Set<string>();
      let writing = true;

      const writerLoops = Array.from({ length: writers }, async (_, w) => {
        for (let i = 0; i < perWriter; i++) {
          ingested.add(await ingest(ingestClient, mailboxId, { subject: `w${w} m${i}` }));
        }
      });
      const allWritten = Promise.all(writerLoops).finally(() => (writing = false));

      const seen: string[] = [];
      let cursor: string | undefined;
      const readPage = async () => {
        const page = await callOk<{ messages: Array<{ message_id: string }>; next_cursor: string }>(
          reader,
          'list_messages',
          { mailbox_id: mailboxId, limit: 7, ...(cursor ? { since_cursor: cursor } : {}) },
        );
        assert.equal(typeof page.next_cursor, 'string');
        cursor = page.next_cursor;
        seen.push(...page.messages.map((m) => m.message_id));
        return page.messages.length;
      };
      while (writing) await readPage();
      await allWritten;
      while ((await readPage()) > 0);

      assert.equal(ingested.size, writers * perWriter);
      assert.equal(new Set(seen).size, seen.length, 'a message was returned twice');
      assert.deepEqual(new Set(seen), ingested, 'the reader missed messages');
    });
  }

  it('list_messages returns mailbox order, and a later page continues after the cursor', async () => {
    const mailboxId = await createMailbox(server.admin);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await ingest(ingestClient, mailboxId, { subject: `n${i}` }));
    const first = await callOk(reader, 'list_messages', { mailbox_id: mailboxId, limit: 2 });
    assert.deepEqual(
      first.messages.map((m: { message_id: string }) => m.message_id),
      ids.slice(0, 2),
    );
    const rest = await callOk(reader, 'list_messages', { mailbox_id: mailboxId, since_cursor: first.next_cursor });
    assert.deepEqual(
      rest.messages.map((m: { message_id: string }) => m.message_id),
      ids.slice(2),
    );
    const empty = await callOk(reader, 'list_messages', { mailbox_id: mailboxId, since_cursor: rest.next_cursor });
    assert.deepEqual(empty.messages, []);
    assert.equal(empty.next_cursor, rest.next_cursor, 'an empty page keeps the position');
  });
});
