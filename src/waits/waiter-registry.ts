import { Injectable } from '@nestjs/common';
import { MailboxAccess } from '../kernel/caller';
import { WaitDelivery } from './wait-spec';
import { MessageWaiter, RequestFeedWaiter, RequestWaiter, ResultWaiter } from './waiters';

/** Key under which waits on every mailbox (tokens bound to `*`) are filed. */
const ALL_MAILBOXES = '*';

export type AnyWaiter = MessageWaiter | RequestWaiter | ResultWaiter | RequestFeedWaiter;

/**
 * The parked waits of this process, filed by what can concern them: message waits by mailbox id
 * (or under `*`), request waits by request id, waits for a persisted wait's result by its id. A
 * doorbell looks up only its own key, so it wakes only the waits it can concern. Request feeds
 * (the console's live lists) are filed by mailbox id like message waits, in an index of their own.
 */
@Injectable()
export class WaiterRegistry {
  private readonly byMailbox = new Map<string, Set<MessageWaiter>>();
  private readonly byRequest = new Map<string, Set<RequestWaiter>>();
  private readonly byResult = new Map<string, Set<ResultWaiter>>();
  private readonly feedsByMailbox = new Map<string, Set<RequestFeedWaiter>>();
  /** The engine's watch of each persisted wait, by wait id (at most one per process). */
  private readonly persisted = new Map<string, MessageWaiter | RequestWaiter>();
  private readonly everyone = new Set<AnyWaiter>();

  get size(): number {
    return this.everyone.size;
  }

  /** Parked waits by kind and delivery; request feeds are not waits of an agent and are not counted. */
  counts(): Array<{ kind: 'message' | 'request'; delivery: WaitDelivery; count: number }> {
    const counts = new Map<string, number>();
    for (const w of this.everyone) {
      if (w instanceof RequestFeedWaiter) continue;
      const kind = w instanceof ResultWaiter ? w.kind : w instanceof MessageWaiter ? 'message' : 'request';
      const key = `${kind} ${w.delivery}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return (['message', 'request'] as const).flatMap((kind) =>
      (['poll', 'websocket', 'persisted'] as const).map((delivery) => ({
        kind,
        delivery,
        count: counts.get(`${kind} ${delivery}`) ?? 0,
      })),
    );
  }

  add(waiter: AnyWaiter): void {
    this.everyone.add(waiter);
    if (waiter instanceof MessageWaiter) for (const key of waiter.keys) file(this.byMailbox, key, waiter);
    else if (waiter instanceof RequestWaiter) for (const key of waiter.keys) file(this.byRequest, key, waiter);
    else if (waiter instanceof RequestFeedWaiter) for (const key of waiter.keys) file(this.feedsByMailbox, key, waiter);
    else file(this.byResult, waiter.waitId, waiter);
    if ((waiter instanceof MessageWaiter || waiter instanceof RequestWaiter) && waiter.persistedId)
      this.persisted.set(waiter.persistedId, waiter);
  }

  remove(waiter: AnyWaiter): void {
    if (!this.everyone.delete(waiter)) return;
    if (waiter instanceof MessageWaiter) for (const key of waiter.keys) unfile(this.byMailbox, key, waiter);
    else if (waiter instanceof RequestWaiter) for (const key of waiter.keys) unfile(this.byRequest, key, waiter);
    else if (waiter instanceof RequestFeedWaiter)
      for (const key of waiter.keys) unfile(this.feedsByMailbox, key, waiter);
    else unfile(this.byResult, waiter.waitId, waiter);
    if (waiter.persistedId && this.persisted.get(waiter.persistedId) === waiter)
      this.persisted.delete(waiter.persistedId);
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

  /** Unsettled request feeds that show this mailbox's requests. */
  requestFeeds(mailboxId: string): RequestFeedWaiter[] {
    const out: RequestFeedWaiter[] = [];
    for (const key of [mailboxId, ALL_MAILBOXES]) {
      for (const w of this.feedsByMailbox.get(key) ?? []) if (!w.settled && w.watches(mailboxId)) out.push(w);
    }
    return out;
  }

  /** Every unsettled request feed (the safety re-check rings them all). */
  allRequestFeeds(): RequestFeedWaiter[] {
    return [...this.everyone].filter((w): w is RequestFeedWaiter => w instanceof RequestFeedWaiter && !w.settled);
  }

  resultWaiters(waitId: string): ResultWaiter[] {
    return [...(this.byResult.get(waitId) ?? [])].filter((w) => !w.settled);
  }

  persistedWatch(waitId: string): MessageWaiter | RequestWaiter | undefined {
    return this.persisted.get(waitId);
  }

  all(): AnyWaiter[] {
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

  watchedResults(): string[] {
    return [...this.byResult.keys()];
  }

  /** Tokens that parked waits act for (each once). */
  watchedTokens(): string[] {
    return [...new Set([...this.everyone].map((w) => w.credential.tokenId))];
  }

  watchedPersisted(): ReadonlySet<string> {
    return new Set(this.persisted.keys());
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
