import { Injectable } from '@nestjs/common';
import { classifyDatabaseError } from '../database/database-errors';
import { InboundDelivery, MessageService, StoredInbound } from '../mail/message.service';

/** Messages stored in one transaction at most. */
const MAX_BATCH = 64;
/** Transactions in flight at once (each holds a database connection). */
const MAX_IN_FLIGHT = 3;

interface Pending {
  delivery: InboundDelivery;
  resolve(stored: StoredInbound[]): void;
  reject(err: unknown): void;
}

/**
 * Group commit for SMTP deliveries: messages that finish DATA while a transaction is in flight are
 * stored together in the next one (MessageService.storeEach), so a burst costs one lock round and
 * one commit instead of one per message. A lone message is stored at once, without waiting. Each
 * caller still resolves only after the commit that holds its message.
 *
 * When a batch fails for a reason other than the database being unreachable (a value of one message
 * that cannot be stored, say), its messages are stored one by one, so one bad message never fails
 * the others.
 */
@Injectable()
export class GroupCommit {
  private readonly queue: Pending[] = [];
  private inFlight = 0;
  /** Mailboxes locked by the batches in flight: a batch never waits for another's lock. */
  private readonly busy = new Set<string>();

  constructor(private readonly messages: MessageService) {}

  /**
   * Stores `delivery` with the next batch. Aborting `signal` while the message still waits in the
   * queue takes it out (rejecting with the abort reason); once its batch is committing it commits.
   */
  store(delivery: InboundDelivery, signal?: AbortSignal): Promise<StoredInbound[]> {
    return new Promise((resolve, reject) => {
      const aborted = () => reject(signal!.reason as Error);
      if (signal?.aborted) return aborted();
      const pending: Pending = {
        delivery,
        resolve: (stored) => {
          signal?.removeEventListener('abort', withdraw);
          resolve(stored);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', withdraw);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      };
      const withdraw = () => {
        const at = this.queue.indexOf(pending);
        if (at === -1) return;
        this.queue.splice(at, 1);
        aborted();
      };
      signal?.addEventListener('abort', withdraw, { once: true });
      this.queue.push(pending);
      this.pump();
    });
  }

  /**
   * Starts batches while there is room: each takes the queued messages (oldest first) whose mailboxes
   * no batch in flight holds. So the messages for one mailbox gather into one batch while the previous
   * one commits, and batches for different mailboxes commit side by side.
   */
  private pump(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.queue.length > 0) {
      const batch: Pending[] = [];
      for (let i = 0; i < this.queue.length && batch.length < MAX_BATCH;) {
        if (this.queue[i].delivery.mailboxIds.some((id) => this.busy.has(id))) i++;
        else batch.push(...this.queue.splice(i, 1));
      }
      if (batch.length === 0) return;
      const mailboxes = new Set(batch.flatMap((p) => p.delivery.mailboxIds));
      for (const id of mailboxes) this.busy.add(id);
      this.inFlight++;
      void this.commit(batch).finally(() => {
        for (const id of mailboxes) this.busy.delete(id);
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async commit(batch: Pending[]): Promise<void> {
    try {
      const results = await this.messages.storeEach(batch.map((p) => p.delivery));
      batch.forEach((p, i) => p.resolve(results[i]));
      return;
    } catch (err) {
      if (batch.length === 1 || classifyDatabaseError(err) === 'unavailable') {
        for (const p of batch) p.reject(err);
        return;
      }
    }
    for (const p of batch) {
      try {
        p.resolve((await this.messages.storeEach([p.delivery]))[0]);
      } catch (err) {
        p.reject(err);
      }
    }
  }
}
