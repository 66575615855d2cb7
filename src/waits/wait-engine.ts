import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { notFound } from '../common/errors';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';
import { MessageCursor } from '../mail/message-cursor';
import { MailboxHead, WaitRepository } from './wait.repository';
import { MessageWaitSpec, RequestWaitSpec, WaitResult, WaitSpec } from './wait-spec';
import { MessageRow, MessageWaiter, RequestWaiter } from './waiters';
import { WaiterRegistry } from './waiter-registry';

/** Rows fetched per query when feeding message waits. */
const PAGE = 500;

/**
 * The one wait mechanism of a replica. A wait is checked against the database when it starts; if
 * nothing matches it is parked in the WaiterRegistry, where it costs no queries. It is checked
 * again only when:
 *  - a doorbell (NOTIFY from any replica's commit) names its mailbox or request: one query feeds
 *    every parked wait of that mailbox, however many there are;
 *  - the doorbell listener reconnected (notifications may have been lost), or the periodic safety
 *    re-check (one statement for all parked waits of the process) sees a position or state that a
 *    lost doorbell should have announced.
 * Poll waits, websocket waits and tasks are all served by this engine.
 */
@Injectable()
export class WaitEngine implements DoorbellSubscriber, OnModuleDestroy {
  private readonly logger = new Logger(WaitEngine.name);
  /** Cursor keys never change; remembering them saves a lookup per doorbell. */
  private readonly cursorKeys = new Map<string, number>();
  /** Per-key single-flight: a doorbell during a running check marks it to run once more. */
  private readonly checks = new Map<string, { again: boolean }>();
  private safetyTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly registry: WaiterRegistry,
    private readonly repository: WaitRepository,
    private readonly config: AppConfig,
    private readonly drain: DrainState,
    listener: DoorbellListener,
  ) {
    listener.subscribe(this);
    drain.onDrain(() => this.shutdownAll());
  }

  /** Starts the periodic safety re-check (the server does; the CLI does not). */
  start(): void {
    this.safetyTimer ??= setInterval(() => void this.safetyRecheck(), this.config.waitRecheckMs);
    this.safetyTimer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.safetyTimer);
    this.shutdownAll();
  }

  /**
   * Runs one wait to its end: a match, the deadline, the caller going away (`signal`), or the
   * replica draining. Throws not_found for requests the caller cannot see.
   */
  async wait(spec: WaitSpec, signal?: AbortSignal): Promise<WaitResult> {
    const waiter = spec.kind === 'message' ? await this.messageWaiter(spec) : await this.requestWaiter(spec);
    if (waiter.settled) return waiter.result;
    if (this.drain.isDraining) return waiter.shutdown();

    // Parked before it is checked again: a commit after that check's snapshot rings a doorbell
    // that finds it here, and a commit before it is seen by the check.
    this.registry.add(waiter);
    const release = () => waiter.finish(waiter.timedOut());
    signal?.addEventListener('abort', release, { once: true });
    try {
      if (waiter instanceof MessageWaiter) await this.ownScan(waiter);
      else waiter.evaluate(await this.repository.requests(waiter.spec.requestIds, { all: true }));
      if (spec.timeoutMs === 0) release();
      else if (!waiter.settled) waiter.timer = setTimeout(release, spec.timeoutMs);
      return await waiter.result;
    } finally {
      signal?.removeEventListener('abort', release);
      waiter.finish(waiter.timedOut());
      this.registry.remove(waiter);
    }
  }

  onDoorbell(bell: Doorbell): void {
    if (bell.kind === 'message') this.ringMailbox(bell.mailboxId);
    else this.ringRequest(bell.requestId);
  }

  onListenerReconnected(): void {
    void this.safetyRecheck();
  }

  private async messageWaiter(spec: MessageWaitSpec): Promise<MessageWaiter> {
    const start =
      spec.since ??
      MessageCursor.fromPositions(
        (await this.repository.heads(this.scopeOf(spec))).map((h) => {
          this.cursorKeys.set(h.mailboxId, h.cursorKey);
          return [h.cursorKey, h.seq];
        }),
      );
    return new MessageWaiter(spec, start);
  }

  private async requestWaiter(spec: RequestWaitSpec): Promise<RequestWaiter> {
    const rows = await this.repository.requests(spec.requestIds, spec.caller.mailboxAccess);
    const byId = new Map(rows.map((r) => [r.id, r]));
    const missing = spec.requestIds.find((id) => !byId.has(id));
    if (missing) throw notFound('request', missing);
    const waiter = new RequestWaiter(
      spec,
      spec.requestIds.map((id) => byId.get(id)!),
    );
    waiter.evaluate(rows);
    return waiter;
  }

  private scopeOf(spec: MessageWaitSpec) {
    return spec.mailboxId ? { all: false as const, ids: [spec.mailboxId] } : spec.caller.mailboxAccess;
  }

  /** A scan of everything a single wait watches, from its own position. */
  private async ownScan(waiter: MessageWaiter): Promise<void> {
    waiter.needsOwnScan = false;
    const behind = (await this.repository.heads(this.scopeOf(waiter.spec))).filter((h) => {
      this.cursorKeys.set(h.mailboxId, h.cursorKey);
      return h.seq > waiter.cursor.position(h.cursorKey);
    });
    await this.feed(
      [waiter],
      behind.map((h) => ({
        mailboxId: h.mailboxId,
        cursorKey: h.cursorKey,
        after: waiter.cursor.position(h.cursorKey),
      })),
    );
  }

  /** A doorbell rang for a mailbox: one pass over its new messages feeds all its parked waits. */
  private async scanMailbox(mailboxId: string): Promise<void> {
    const waiters = this.registry.messageWaiters(mailboxId);
    if (waiters.length === 0) return;
    const cursorKey = this.cursorKeys.get(mailboxId) ?? (await this.lookUpCursorKey(mailboxId));
    if (cursorKey === undefined) return;
    const after = Math.min(...waiters.map((w) => w.cursor.position(cursorKey)));
    await this.feed(waiters, [{ mailboxId, cursorKey, after }]);
  }

  /**
   * Pages through the messages after the given positions, mailbox by mailbox in cursor-key order
   * (the order cursors are cut in when a result is full), and hands each page to the waits.
   */
  private async feed(
    waiters: MessageWaiter[],
    positions: Array<{ mailboxId: string; cursorKey: number; after: number }>,
  ): Promise<void> {
    let pending = [...positions].sort((a, b) => a.cursorKey - b.cursorKey);
    while (pending.length > 0 && waiters.some((w) => !w.settled && !w.full)) {
      const rows = await this.repository.messagesAfter(pending, PAGE);
      for (const group of byMailbox(rows)) {
        for (const w of waiters) if (w.watches(group[0].mailboxId)) w.consume(group);
      }
      if (rows.length < PAGE) break;
      const last = rows[rows.length - 1];
      pending = pending
        .filter((p) => p.cursorKey >= last.cursorKey)
        .map((p) => (p.cursorKey === last.cursorKey ? { ...p, after: last.seq } : p));
    }
    for (const w of waiters) {
      w.settleIfMatched();
      if (w.needsOwnScan && !w.settled)
        void this.ownScan(w).then(
          () => w.settleIfMatched(),
          (err) => this.failed(err),
        );
    }
  }

  private async checkRequest(requestId: string): Promise<void> {
    const waiters = this.registry.requestWaiters(requestId);
    if (waiters.length === 0) return;
    const ids = [...new Set(waiters.flatMap((w) => w.spec.requestIds))];
    const rows = await this.repository.requests(ids, { all: true });
    for (const w of waiters) w.evaluate(rows);
  }

  /**
   * One statement for every parked wait of this process: where a mailbox moved past a wait's
   * position, or a request reached an awaited state, the doorbell was lost: act as if it rang.
   */
  private async safetyRecheck(): Promise<void> {
    if (this.registry.size === 0) return;
    try {
      const { heads, states } = await this.repository.probe(
        this.registry.watchedMailboxes(),
        this.registry.watchedRequests(),
      );
      for (const head of heads) {
        this.cursorKeys.set(head.mailboxId, head.cursorKey);
        if (this.registry.messageWaiters(head.mailboxId).some((w) => behind(w, head))) {
          this.ringMailbox(head.mailboxId);
        }
      }
      for (const [requestId, state] of states) {
        if (this.registry.requestWaiters(requestId).some((w) => w.spec.states.has(state))) {
          this.ringRequest(requestId);
        }
      }
    } catch (err) {
      this.failed(err);
    }
  }

  private ringMailbox(mailboxId: string): void {
    this.singleFlight(`m:${mailboxId}`, () => this.scanMailbox(mailboxId));
  }

  private ringRequest(requestId: string): void {
    this.singleFlight(`r:${requestId}`, () => this.checkRequest(requestId));
  }

  private async lookUpCursorKey(mailboxId: string): Promise<number | undefined> {
    const [head] = await this.repository.heads({ all: false, ids: [mailboxId] });
    if (head) this.cursorKeys.set(mailboxId, head.cursorKey);
    return head?.cursorKey;
  }

  private singleFlight(key: string, run: () => Promise<void>): void {
    const running = this.checks.get(key);
    if (running) {
      running.again = true;
      return;
    }
    const state = { again: false };
    this.checks.set(key, state);
    void (async () => {
      do {
        state.again = false;
        await run().catch((err) => this.failed(err));
      } while (state.again);
      this.checks.delete(key);
    })();
  }

  private shutdownAll(): void {
    for (const waiter of this.registry.all()) waiter.finish(waiter.shutdown());
  }

  private failed(err: unknown): void {
    // The safety re-check will retry; the waits themselves stay parked.
    this.logger.error(err instanceof Error ? err : String(err));
  }
}

function behind(waiter: MessageWaiter, head: MailboxHead): boolean {
  return waiter.cursor.position(head.cursorKey) < head.seq;
}

function* byMailbox(rows: MessageRow[]): Generator<MessageRow[]> {
  let start = 0;
  for (let i = 1; i <= rows.length; i++) {
    if (i === rows.length || rows[i].mailboxId !== rows[start].mailboxId) {
      yield rows.slice(start, i);
      start = i;
    }
  }
}
