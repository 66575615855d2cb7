import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Caller } from '#app/kernel/caller.js';
import { MessageService } from '#app/mail/message.service.js';
import { AwaitArguments, WaitService } from '#app/waits/wait.service.js';
import { WaiterRegistry } from '#app/waits/waiter-registry.js';
import { WaitResult } from '#app/waits/wait-spec.js';
import { inbound, refused, ServiceTier, startServiceTier } from '../support/service-tier';
import { waitFor } from '../support/wait-for';

interface WaitRow {
  status: 'pending' | 'resolved';
  owner: string | null;
  result: WaitResult | null;
  resolved_at: Date | null;
}

const eventIds = (result: WaitResult | null) =>
  ((result?.events ?? []) as Array<{ message_id: string }>).map((e) => e.message_id);

/**
 * Persisted waits (websocket delivery, `wait_id`, tasks) across two replicas of one database: each
 * pending wait is watched by one owner, the replica holding a live lease; its result is fixed once
 * and then answered to every `wait_id` poll, from any replica; a replica that shuts down hands its
 * waits to the other, which resolves them. Each replica is an application context of its own (the
 * warning @nestjs/typeorm logs about a second default data source in the process concerns one
 * context holding two, not this).
 */
describe('persisted waits: ownership between two replicas', () => {
  let first: ServiceTier;
  let second: ServiceTier;
  let firstOpen = true;
  let mailbox: string;
  let agent: Caller;
  let firstOwner: string;

  before(async () => {
    first = await startServiceTier();
    second = await startServiceTier({ db: first.db });
    await first.startDoorbells();
    first.startWaitEngine();
    mailbox = await first.mailbox();
    agent = await first.caller(['mail:read'], [mailbox]);
    firstOwner = await waitFor('the first replica to take its lease', async () => {
      const rows = await first.db.query<{ id: string }>(`SELECT id FROM wait_owners`);
      return rows.length === 1 ? rows[0].id : undefined;
    });
  });
  after(async () => {
    if (firstOpen) await first?.close({ keepDatabase: true });
    await second?.close();
  });

  const messageWait = (subject: string): AwaitArguments => ({
    event: { type: 'message_received', mailbox_id: mailbox, subject_contains: subject },
    timeout_seconds: 300,
    delivery: 'poll',
  });

  const waitRow = async (id: string) =>
    (await first.db.query<WaitRow>(`SELECT status, owner, result, resolved_at FROM waits WHERE id = $1`, [id]))[0];

  const resolved = (id: string) =>
    waitFor(`wait ${id} to be resolved`, async () => {
      const row = await waitRow(id);
      return row.status === 'resolved' ? row : undefined;
    });

  const poll = (tier: ServiceTier, waitId: string, caller = agent) =>
    tier.get(WaitService).await(caller, { wait_id: waitId, timeout_seconds: 30, delivery: 'poll' });

  it('the replica holding a lease owns a new wait, fixes its result once, and any replica answers it', async () => {
    const wait = await first.get(WaitService).persist(agent, messageWait('contract'), undefined);
    await waitFor('the wait to be owned', async () => (await waitRow(wait.id)).owner === firstOwner);

    // Written through the replica that does not watch: the doorbell reaches the owner.
    const [signed] = await second.get(MessageService).store([mailbox], inbound({ subject: 'Contract signed' }));
    const row = await resolved(wait.id);
    assert.equal(row.owner, null, 'a resolved wait has no owner');
    assert.deepEqual(eventIds(row.result), [signed.messageId]);

    // Fixed: a later match changes nothing, and every poll, on either replica, answers the same.
    await first.get(MessageService).store([mailbox], inbound({ subject: 'contract amended' }));
    for (const tier of [first, second]) assert.deepEqual(eventIds(await poll(tier, wait.id)), [signed.messageId]);
    assert.deepEqual((await waitRow(wait.id)).resolved_at, row.resolved_at);
  });

  it("another token's wait_id is not_found, like an unknown one", async () => {
    const wait = await first.get(WaitService).persist(agent, messageWait('private'), undefined);
    const other = await first.caller(['mail:read'], [mailbox]);
    for (const id of [wait.id, 'wt_doesnotexist']) {
      await refused(poll(first, id, other), 'not_found', 'wait_not_found');
    }
  });

  it('a replica that shuts down hands its waits over; the other resolves them and wakes its wait_id polls', async () => {
    const wait = await first.get(WaitService).persist(agent, messageWait('handover'), undefined);
    await waitFor('the wait to be owned', async () => (await waitRow(wait.id)).owner === firstOwner);
    await second.startDoorbells();
    second.startWaitEngine();

    await first.close({ keepDatabase: true });
    firstOpen = false;
    const secondOwner = await waitFor('the second replica to claim the wait', async () => {
      const { owner } = await waitRow(wait.id);
      return owner !== null && owner !== firstOwner ? owner : undefined;
    });
    const owners = await second.db.query<{ id: string }>(`SELECT id FROM wait_owners`);
    assert.deepEqual(
      owners.map((o) => o.id),
      [secondOwner],
      'the first lease was given up',
    );

    const polling = poll(second, wait.id);
    await waitFor('the wait_id poll to block', () =>
      second
        .get(WaiterRegistry)
        .resultWaiters(wait.id)
        .some((w) => w.timer !== undefined),
    );
    const [arrived] = await second.get(MessageService).store([mailbox], inbound({ subject: 'Handover done' }));
    assert.deepEqual(eventIds(await polling), [arrived.messageId]);
    assert.deepEqual(eventIds((await resolved(wait.id)).result), [arrived.messageId]);
  });
});
