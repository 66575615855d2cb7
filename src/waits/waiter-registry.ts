import { Injectable } from '@nestjs/common';
import { MailboxAccess } from '../auth/caller';
import { MessageWaiter, RequestWaiter, Waiter } from './waiters';

/** Key under which waits on every mailbox (tokens bound to `*`) are filed. */
const ALL_MAILBOXES = '*';

/**
 * The parked waits of this process, filed by what can concern them: message waits by mailbox id
 * (or under `*`), request waits by request id. A doorbell looks up only its own key, so it wakes
 * only the waits it can concern.
 */
@Injectable()
export class WaiterRegistry {
  private readonly byMailbox = new Map<string, Set<MessageWaiter>>();
  private readonly byRequest = new Map<string, Set<RequestWaiter>>();
  private readonly everyone = new Set<Waiter>();

  get size(): number {
    return this.everyone.size;
  }

  counts(): { message: number; request: number } {
    let message = 0;
    for (const w of this.everyone) if (w instanceof MessageWaiter) message++;
    return { message, request: this.everyone.size - message };
  }

  add(waiter: MessageWaiter | RequestWaiter): void {
    this.everyone.add(waiter);
    if (waiter instanceof MessageWaiter) for (const key of waiter.keys) file(this.byMailbox, key, waiter);
    else for (const key of waiter.keys) file(this.byRequest, key, waiter);
  }

  remove(waiter: MessageWaiter | RequestWaiter): void {
    if (!this.everyone.delete(waiter)) return;
    if (waiter instanceof MessageWaiter) for (const key of waiter.keys) unfile(this.byMailbox, key, waiter);
    else for (const key of waiter.keys) unfile(this.byRequest, key, waiter);
  }

  /** Unsettled message waits that watch this mailbox. */
  messageWaiters(mailboxId: string): MessageWaiter[] {
    const out: MessageWaiter[] = [];
    for (const key of [mailboxId, ALL_MAILBOXES]) {
      for (const w of this.byMailbox.get(key) ?? []) if (!w.settled && w.watches(mailboxId)) out.push(w);
    }
    return out;
  }

  requestWaiters(requestId: string): RequestWaiter[] {
    return [...(this.byRequest.get(requestId) ?? [])].filter((w) => !w.settled);
  }

  all(): Waiter[] {
    return [...this.everyone];
  }

  /** Mailboxes some parked wait watches (all of them when a `*` wait is parked). */
  watchedMailboxes(): MailboxAccess {
    if (this.byMailbox.has(ALL_MAILBOXES)) return { all: true };
    return { all: false, ids: [...this.byMailbox.keys()] };
  }

  watchedRequests(): string[] {
    return [...this.byRequest.keys()];
  }
}

function file<W>(index: Map<string, Set<W>>, key: string, waiter: W): void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(waiter);
}

function unfile<W>(index: Map<string, Set<W>>, key: string, waiter: W): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(waiter);
  if (set.size === 0) index.delete(key);
}
