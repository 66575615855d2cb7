import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Caller } from '#app/kernel/caller.js';
import { MessageService } from '#app/mail/message.service.js';
import { inbound, refused, ServiceTier, startServiceTier } from '../support/service-tier';

/** Every message of the mailbox through `list`, page by page, following next_cursor. */
async function listAll(messages: MessageService, caller: Caller, mailboxId: string, pageSize: number) {
  const seen: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await messages.list(caller, mailboxId, cursor, pageSize);
    if (page.messages.length === 0) return { ids: seen, cursor: page.next_cursor };
    seen.push(...page.messages.map((m) => m.message_id));
    cursor = page.next_cursor;
  }
}

/**
 * MessageService: inbound mail is stored per mailbox in one order (the cursor's), all copies of a
 * delivery or none, once per Message-ID, threaded by its headers, and shown only within the
 * caller's mailboxes.
 */
describe('MessageService', () => {
  let tier: ServiceTier;
  let messages: MessageService;
  let mailbox: string;
  let second: string;
  let reader: Caller;
  let outsider: Caller;

  before(async () => {
    tier = await startServiceTier();
    messages = tier.get(MessageService);
    mailbox = await tier.mailbox();
    second = await tier.mailbox();
    reader = await tier.caller(['mail:read', 'mail:ingest'], [mailbox, second]);
    outsider = await tier.caller(['mail:read', 'mail:ingest'], [await tier.mailbox()]);
  });
  after(() => tier?.close());

  const countIn = async (mailboxId: string) =>
    Number(
      (await tier.db.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE mailbox_id = $1`, [mailboxId]))[0]
        .n,
    );

  it('concurrent ingests get one gapless order; paging by cursor returns each once, in it', async () => {
    const box = await tier.mailbox();
    const caller = await tier.caller(['mail:read', 'mail:ingest'], [box]);
    const stored = await Promise.all(
      Array.from({ length: 25 }, (_, i) => messages.ingest(caller, box, inbound({ subject: `burst ${i}` }))),
    );
    const seqs = await tier.db.query<{ id: string; mailbox_seq: string }>(
      `SELECT id, mailbox_seq FROM messages WHERE mailbox_id = $1 ORDER BY mailbox_seq`,
      [box],
    );
    assert.deepEqual(
      seqs.map((r) => Number(r.mailbox_seq)),
      Array.from({ length: 25 }, (_, i) => i + 1),
    );

    const { ids, cursor } = await listAll(messages, caller, box, 4);
    assert.deepEqual(
      ids,
      seqs.map((r) => r.id),
    );
    assert.deepEqual(new Set(ids), new Set(stored.map((s) => s.messageId)));

    // The last cursor is a resume point: only what arrives after it comes next.
    const later = await messages.ingest(caller, box, inbound({ subject: 'later' }));
    const resumed = await messages.list(caller, box, cursor, 10);
    assert.deepEqual(
      resumed.messages.map((m) => m.message_id),
      [later.messageId],
    );
  });

  it('a Message-ID already in the mailbox is a duplicate: the first copy stays, nothing is announced', async () => {
    const header = `<dup-${Date.now()}@example.org>`;
    const first = await messages.ingest(reader, mailbox, inbound({ messageIdHeader: header, subject: 'first' }));
    const eventsBefore = await tier.db.query(`SELECT id FROM events WHERE mailbox_id = $1`, [mailbox]);
    const again = await messages.ingest(reader, mailbox, inbound({ messageIdHeader: header, subject: 'second' }));
    assert.deepEqual(again, { mailboxId: mailbox, messageId: first.messageId, duplicate: true });
    assert.equal((await messages.get(reader, first.messageId)).subject, 'first');
    assert.equal(
      (await tier.db.query(`SELECT id FROM events WHERE mailbox_id = $1`, [mailbox])).length,
      eventsBefore.length,
    );

    // The same Message-ID in another mailbox is that mailbox's own message.
    const elsewhere = await messages.ingest(reader, second, inbound({ messageIdHeader: header }));
    assert.equal(elsewhere.duplicate, false);
    assert.notEqual(elsewhere.messageId, first.messageId);
  });

  it('within one batch, a repeated message is a duplicate of its first copy', async () => {
    const message = inbound({ messageIdHeader: `<batch-${Date.now()}@example.org>` });
    const [[one], [two]] = await messages.storeEach([
      { mailboxIds: [mailbox], message },
      { mailboxIds: [mailbox], message },
    ]);
    assert.equal(one.duplicate, false);
    assert.deepEqual(two, { mailboxId: mailbox, messageId: one.messageId, duplicate: true });
  });

  it('a delivery to several mailboxes stores every copy or none', async () => {
    const before = [await countIn(mailbox), await countIn(second)];
    const copies = await messages.store([mailbox, second], inbound({ subject: 'to both' }));
    assert.deepEqual(
      copies.map((c) => c.mailboxId),
      [mailbox, second],
    );
    assert.deepEqual([await countIn(mailbox), await countIn(second)], [before[0] + 1, before[1] + 1]);

    // A mailbox that does not exist fails the whole delivery: the other copy rolls back too.
    await assert.rejects(messages.store([mailbox, 'mbx_gone'], inbound({ subject: 'half' })));
    assert.equal(await countIn(mailbox), before[0] + 1);
  });

  it('replies join the thread their In-Reply-To or References name, within the mailbox', async () => {
    const parentHeader = `<parent-${Date.now()}@example.org>`;
    const parent = await messages.ingest(reader, mailbox, inbound({ messageIdHeader: parentHeader }));
    const reply = await messages.ingest(reader, mailbox, inbound({ inReplyTo: parentHeader }));
    const viaReferences = await messages.ingest(
      reader,
      mailbox,
      inbound({ references: [parentHeader, '<unknown@example.org>'] }),
    );
    const unrelated = await messages.ingest(reader, mailbox, inbound());
    const otherBox = await messages.ingest(reader, second, inbound({ inReplyTo: parentHeader }));

    const thread = async (id: string) => (await messages.get(reader, id)).thread_id;
    const parentThread = await thread(parent.messageId);
    assert.equal(await thread(reply.messageId), parentThread);
    assert.equal(await thread(viaReferences.messageId), parentThread);
    assert.notEqual(await thread(unrelated.messageId), parentThread);
    assert.notEqual(await thread(otherBox.messageId), parentThread);
  });

  it('over-long header values are stored cut, never refused', async () => {
    const stored = await messages.ingest(
      reader,
      mailbox,
      inbound({ subject: 'S'.repeat(5000), from: `${'a'.repeat(400)}@x.org` }),
    );
    const shown = await messages.get(reader, stored.messageId);
    assert.equal(shown.subject.length, 2000);
    assert.equal(shown.from.length, 320);
  });

  it("other mailboxes' messages and mailboxes are not_found, for ingest, list and get alike", async () => {
    const { messageId } = await messages.ingest(reader, mailbox, inbound({ subject: 'private' }));
    await refused(messages.get(outsider, messageId), 'not_found', 'message_not_found');
    await refused(messages.get(outsider, 'msg_doesnotexist'), 'not_found', 'message_not_found');
    await refused(messages.list(outsider, mailbox, undefined, 10), 'not_found', 'mailbox_not_found');
    const before = await countIn(mailbox);
    await refused(messages.ingest(outsider, mailbox, inbound()), 'not_found', 'mailbox_not_found');
    assert.equal(await countIn(mailbox), before);
  });
});
