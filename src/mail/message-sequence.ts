import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { MailboxEntity } from './mailbox.entity';

/**
 * Hands out message positions within a mailbox: 1, 2, 3, … with no gaps and in commit order.
 *
 * Why not a `bigserial`: sequence values are taken at insert time, not at commit time. Two writers
 * can take 10 and 11 and commit 11 first; a reader that saw 11 and moved its cursor there would
 * never see 10. Here the counter lives in the mailbox row and is incremented by the inserting
 * transaction (`UPDATE … SET message_seq = message_seq + 1`). The update takes the row lock and
 * holds it until commit, so the next writer of the same mailbox waits, and reads the incremented
 * value only once the previous transaction has committed (or rolled back, which also undoes its
 * increment: no gap). Hence whenever a reader sees position n committed, every position below n is
 * committed and visible too, and "everything after n" is exact.
 *
 * Writers of one mailbox serialise for the length of their (short) transactions; writers of
 * different mailboxes never wait on each other.
 */
@Injectable()
export class MessageSequence {
  /** Locks the mailbox row until the transaction ends; call before anything else that depends on it. */
  async lock(manager: EntityManager, mailboxId: string): Promise<void> {
    await manager
      .createQueryBuilder(MailboxEntity, 'm')
      .select('m.id')
      .where('m.id = :mailboxId', { mailboxId })
      .setLock('pessimistic_write')
      .getOneOrFail();
  }

  /** The next position of `mailboxId`, valid only inside the caller's transaction. */
  async next(manager: EntityManager, mailboxId: string): Promise<number> {
    // An UPDATE through manager.query() resolves to [rows, rowCount].
    const [rows] = await manager.query<[Array<{ message_seq: string }>, number]>(
      'UPDATE mailboxes SET message_seq = message_seq + 1 WHERE id = $1 RETURNING message_seq',
      [mailboxId],
    );
    return Number(rows[0].message_seq);
  }
}
