import { Injectable, Logger } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { notFound } from '../kernel/errors';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';
import { MessageCursor } from '../mail/message-cursor';
import { Credential, losesMailbox, MailboxAccess } from '../kernel/caller';
import { AccessEndReason } from '../auth/credential-revocation';
import { CredentialRepository } from '../auth/credential.repository';
import { PersistedWaitEntity } from './persisted-wait.entity';
import { LEASE_TICKS_PER_RECHECK, PersistedWaitOwnership } from './persisted-wait-ownership';
import { PersistedWaitRepository } from './persisted-wait.repository';
import { MailboxHead, WaitRepository } from './wait.repository';
import { accessEndedError, MessageWaitSpec, RequestWaitSpec, WaitDelivery, WaitResult, WaitSpec } from './wait-spec';
import {
  isWatch,
  MessageRow,
  MessageWaiter,
  msUntil,
  RequestFeedWaiter,
  RequestWaiter,
  ResultWaiter,
  SharedResults,
  Waiter,
} from './waiters';
import { SingleFlight } from './single-flight';
import { WaiterRegistry } from './waiter-registry';
import { WaitMetrics } from './waits.metrics';
import { BackgroundJob, Job } from '../lifecycle/background-job';

export interface ResultWaitOptions {
  /** The token of the persisted wait, whose revocation or expiry ends this wait for its result. */
  credential: Credential;
  delivery: WaitDelivery;
  timeoutMs: number;
  signal?: AbortSignal;
  /** What the caller answers when its own wait for the result ends first. */
  timedOut: () => WaitResult;
  shutdown: () => WaitResult;
}

/** Rows fetched per query when feeding message waits. */
const PAGE = 500;
/**
 * How long a revocation is remembered: a wait authenticated just before it but parked just after
 * its doorbell still ends at once. Later than this the safety re-check finds the token revoked.
 */
const REMEMBER_REVOKED_MS = 300_000;

/**
 * The one wait mechanism of a replica. A wait is checked against the database when it starts; if
 * nothing matches it is parked in the WaiterRegistry, where it costs no queries. It is checked
 * again only when:
 *  - a doorbell (NOTIFY from any replica's commit) names its mailbox or request: one query feeds
 *    every parked wait of that mailbox, however many there are;
 *  - the doorbell listener reconnected (notifications may have been lost), or the periodic safety
 *    re-check (one statement for all parked waits of the process) sees a position or state that a
 *    lost doorbell should have announced.
 *
 * A wait ends early, without a result, when its token loses its access: at once on every replica
 * when the `credential_revoked` doorbell rings, at `expires_at` by its own timer (only armed when
 * the token expires before the wait's deadline), and otherwise at the next safety re-check.
 *
 * Request feeds (the console's live pending lists) are parked here too, so they ring with the same
 * `request` doorbells, end with the same revocations and drain, and are covered by the same safety
 * re-check; they do not settle on a change but re-read what they show (see RequestFeedWaiter).
 *
 * Persisted waits (websocket delivery, `wait_id`, tasks) are watched the same way, but by one
 * replica each: PersistedWaitOwnership holds the lease and claims them, and its watches are
 * ordinary waiters of this engine.
 */
@Job('watch')
@Injectable()
export class WaitEngine implements DoorbellSubscriber, BackgroundJob {
  private readonly logger = new Logger(WaitEngine.name);
  /** Cursor keys never change; remembering them saves a lookup per doorbell. */
  private readonly cursorKeys = new Map<string, number>();
  /** Per-key single-flight: a doorbell during a running check marks it to run once more. */
  private readonly checks = new SingleFlight((err) => this.failed(err));
  /**
   * Credentials that lost their access lately (binding id → when the doorbell rang, and why when it
   * said so), see REMEMBER_REVOKED_MS.
   */
  private readonly revoked = new Map<string, { at: number; reason: AccessEndReason | undefined }>();
  private safetyTimer: NodeJS.Timeout | undefined;
  private readonly ownership: PersistedWaitOwnership;

  constructor(
    private readonly registry: WaiterRegistry,
    private readonly repository: WaitRepository,
    private readonly persisted: PersistedWaitRepository,
    credentials: CredentialRepository,
    config: AppConfig,
    private readonly drain: DrainState,
    private readonly metrics: WaitMetrics,
    listener: DoorbellListener,
  ) {
    this.ownership = new PersistedWaitOwnership(
      {
        catchUp: (waiters) => this.catchUp(waiters),
        lapsed: (credential) => this.lapsed(credential),
        drop: (watch) => this.drop(watch),
        ring: (key, at, run) => this.singleFlight(key, at, run),
        settled: (key) => this.checks.settled(key),
        observeWakes: (kind, waiters, at) => this.observeWakes(kind, waiters, at),
        failed: (err) => this.failed(err),
      },
      registry,
      repository,
      persisted,
      credentials,
      config,
      drain,
      metrics,
      listener,
    );
    listener.subscribe(this);
    drain.onDrain(async () => {
      this.shutdownAll();
      await this.ownership.release();
    });
  }

  /**
   * Starts the periodic safety re-check and the lease: the first lease tick (in the background, so
   * start-up does not wait for it) claims the waits nobody owns. Server only.
   */
  start(): void {
    // Every fourth beat is a re-check period: the safety re-check, and the lease tick of a replica
    // alone, run then together, so that an idle replica's database work stays one burst per period.
    let beats = 0;
    this.safetyTimer ??= setInterval(() => {
      const period = ++beats % LEASE_TICKS_PER_RECHECK === 0;
      this.ownership.beat(period);
      if (period) void this.safetyRecheck();
    }, this.ownership.leaseTickMs(true));
    this.safetyTimer.unref();
    this.ownership.start();
  }

  /** This process's name as the owner of persisted waits (see PersistedWaitOwnership). */
  get owner(): string {
    return this.ownership.owner;
  }

  async stop(): Promise<void> {
    clearInterval(this.safetyTimer);
    this.shutdownAll();
    await this.ownership.release();
  }

  /**
   * Runs one wait to its end: a match, the deadline, the caller going away (`signal`), or the
   * replica draining. Throws not_found for requests the caller cannot see, and `unauthorized` when
   * the token is revoked or expires meanwhile.
   */
  async wait(spec: WaitSpec, signal?: AbortSignal): Promise<WaitResult> {
    const waiter = spec.kind === 'message' ? await this.messageWaiter(spec) : await this.requestWaiter(spec);
    if (waiter.settled) return waiter.result;
    return this.park(waiter, spec.timeoutMs, signal, () => this.check(waiter));
  }

  /** Waits for the fixed result of a persisted wait (a `wait_id` poll, an open websocket). */
  awaitResult(wait: PersistedWaitEntity, options: ResultWaitOptions): Promise<WaitResult> {
    const waiter = new ResultWaiter(
      wait.id,
      wait.kind,
      options.credential,
      options.delivery,
      options.timedOut,
      options.shutdown,
    );
    return this.park(waiter, options.timeoutMs, options.signal, async () =>
      waiter.evaluate(await this.persisted.find(wait.id)),
    );
  }

  /**
   * Keeps a request feed parked until `timeoutMs` passes, `signal` aborts, the replica drains or
   * its token loses its access (then it throws `unauthorized`, like a wait). It rings once at the
   * start, after it is filed, so nothing committed between the caller's first read and now is
   * missed, then on every `request` doorbell of its mailboxes and at every safety re-check.
   */
  async follow(feed: RequestFeedWaiter, timeoutMs: number, signal?: AbortSignal): Promise<WaitResult> {
    return this.park(feed, timeoutMs, signal, () => Promise.resolve(feed.ring()));
  }

  /**
   * Parks a waiter until it settles or `timeoutMs` passes. It is filed before `check` runs: a
   * commit after the check's snapshot rings a doorbell that finds it, a commit before is seen by
   * the check; likewise a revocation. `timeoutMs` 0 checks once. A token that expires before the
   * deadline arms the timer for its expiry instead.
   */
  private async park(
    waiter: MessageWaiter | RequestWaiter | ResultWaiter | RequestFeedWaiter,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    check: () => Promise<void>,
  ): Promise<WaitResult> {
    if (this.drain.isDraining) return waiter.shutdown();
    this.registry.add(waiter);
    const release = () => waiter.finish(waiter.timedOut());
    signal?.addEventListener('abort', release, { once: true });
    // A signal aborted before it is listened to fires no event: without this the waiter would stay
    // parked until its timeout (an abort while the caller was still reading, e.g. the task row).
    if (signal?.aborted) release();
    try {
      if (!waiter.settled) {
        const lapsed = this.lapsed(waiter.credential);
        if (lapsed) waiter.endAccess(lapsed);
        else await check();
      }
      if (timeoutMs === 0) release();
      else if (!waiter.settled) {
        const expiresInMs = msUntil(waiter.credential.expiresAt);
        waiter.timer =
          expiresInMs < timeoutMs
            ? setTimeout(() => waiter.endAccess('token_expired'), expiresInMs)
            : setTimeout(release, timeoutMs);
      }
      const result = await waiter.result;
      if (waiter.accessEnded) throw accessEndedError(waiter.accessEnded);
      return result;
    } finally {
      signal?.removeEventListener('abort', release);
      // Usually settled already: its timeout result (a cursor to encode) is built only when needed.
      if (!waiter.settled) waiter.finish(waiter.timedOut());
      this.registry.remove(waiter);
    }
  }

  /** Brings a message or request waiter up to date with the database. */
  private check(waiter: MessageWaiter | RequestWaiter): Promise<void> {
    return this.catchUp([waiter]);
  }

  /**
   * Brings waiters up to date with the database, however many: one read of every request the
   * request waiters watch, and one scan, from each waiter's own position, for the message waiters.
   */
  private async catchUp(waiters: ReadonlyArray<MessageWaiter | RequestWaiter>): Promise<void> {
    const requestWaiters = waiters.filter((w): w is RequestWaiter => w instanceof RequestWaiter);
    const messageWaiters = waiters.filter((w): w is MessageWaiter => w instanceof MessageWaiter);
    if (requestWaiters.length > 0) {
      const ids = [...new Set(requestWaiters.flatMap((w) => w.spec.requestIds))];
      const rows = await this.repository.requests(ids, { all: true });
      for (const w of requestWaiters) w.evaluate(rows);
    }
    if (messageWaiters.length > 0) await this.ownScan(messageWaiters);
  }

  onDoorbell(bell: Doorbell): void {
    switch (bell.kind) {
      case 'credential_revoked':
        return this.endAccess(bell.tokenId, bell.reason);
      case 'message':
        return this.ringMailbox(bell.mailboxId, bell.at);
      case 'request':
        this.ringFeeds(bell.mailboxId);
        return this.ringRequest(bell.requestId, bell.at);
      case 'wait_created':
        // Stored by a replica that watches it itself, or unowned (stored while that replica held
        // no lease): then every replica tries to claim it, and one gets it.
        return this.ownership.onWaitCreated(bell.waitId, bell.owner);
      case 'waits_released':
        return this.ownership.ringClaim();
      case 'wait_resolved':
        return this.ownership.ringResults([bell.waitId], bell.at);
      case 'waits_resolved':
        return this.ownership.ringResults(bell.waitIds, bell.at);
    }
  }

  onListenerReconnected(): void {
    void this.safetyRecheck();
    // The lease names the listener's session, which is a new one now.
    this.ownership.ringLease();
  }

  /**
   * A credential lost its access: every wait of it in this process ends now (a client waiting gets
   * the `unauthorized` error), and the watches of its persisted waits are dropped (the revocation
   * ended those in the database). Rare enough to look at every waiter. Work authenticated later
   * keeps going: an OAuth principal that lost one mailbox may still reach others.
   */
  private endAccess(tokenId: string, reason: AccessEndReason | undefined): void {
    const now = Date.now();
    this.revoked.set(tokenId, { at: now, reason });
    for (const [id, { at }] of this.revoked) if (at < now - REMEMBER_REVOKED_MS) this.revoked.delete(id);
    for (const waiter of this.registry.all()) {
      if (waiter.credential.tokenId !== tokenId || waiter.credential.authenticatedAt > now) continue;
      if (isWatch(waiter)) this.drop(waiter);
      else waiter.endAccess(reason ?? lapseReason(waiter.credential));
    }
  }

  /**
   * The safety net for a lost `access_removed` doorbell: the principal's blocking waits that were
   * authenticated with a mailbox it no longer reaches end. (Its stored waits were ended in the
   * database by the change itself; whoever waits for their results learns it from there.)
   */
  private endLostAccess(principalId: string, mailboxes: readonly string[]): void {
    for (const waiter of this.registry.all()) {
      if (waiter.credential.tokenId !== principalId || waiter.persistedId) continue;
      if (waiter instanceof ResultWaiter) continue;
      const access =
        waiter instanceof RequestFeedWaiter ? waiter.caller.mailboxAccess : waiter.spec.caller.mailboxAccess;
      if (losesMailbox(access.all ? ['*'] : access.ids, mailboxes)) waiter.endAccess('access_removed');
    }
  }

  /**
   * Why this credential has no access any more, if it has none (known without a query): it expired,
   * or a revocation rang after its access was read.
   */
  private lapsed(credential: Credential): AccessEndReason | undefined {
    if (msUntil(credential.expiresAt) <= 0) return 'token_expired';
    const revocation = this.revoked.get(credential.tokenId);
    if (!revocation || credential.authenticatedAt > revocation.at) return undefined;
    return revocation.reason ?? 'token_revoked';
  }

  private async messageWaiter(spec: MessageWaitSpec): Promise<MessageWaiter> {
    return new MessageWaiter(spec, await this.startCursor(spec));
  }

  private async requestWaiter(spec: RequestWaitSpec): Promise<RequestWaiter> {
    const rows = await this.repository.requests(spec.requestIds, spec.caller.mailboxAccess);
    const missing = spec.requestIds.find((id) => !rows.some((r) => r.id === id));
    if (missing) throw notFound('request', missing);
    const waiter = new RequestWaiter(spec, rows);
    waiter.evaluate(rows);
    return waiter;
  }

  /**
   * The starting position of a message wait that names none: the newest message of each watched
   * mailbox now. Also what a persisted wait stores as its cursor. A named mailbox that this read
   * does not find does not exist (404): the same statement is the wait's existence check.
   */
  async startCursor(spec: MessageWaitSpec): Promise<MessageCursor> {
    if (spec.since) return spec.since;
    const heads = await this.repository.heads(this.scopeOf(spec));
    if (spec.mailboxId && heads.length === 0) throw notFound('mailbox', spec.mailboxId);
    return MessageCursor.fromPositions(
      heads.map((h) => {
        this.cursorKeys.set(h.mailboxId, h.cursorKey);
        return [h.cursorKey, h.seq];
      }),
    );
  }

  private scopeOf(spec: MessageWaitSpec) {
    return spec.mailboxId ? { all: false as const, ids: [spec.mailboxId] } : spec.caller.mailboxAccess;
  }

  /**
   * A scan of everything the waiters watch, each from its own position: one look at the heads of
   * their mailboxes, then one pass over each mailbox that some waiter is behind in, from the
   * earliest of their positions (a waiter skips what it has seen).
   */
  private async ownScan(waiters: readonly MessageWaiter[]): Promise<void> {
    for (const w of waiters) w.needsOwnScan = false;
    const scopes = waiters.map((w) => this.scopeOf(w.spec));
    const scope: MailboxAccess = scopes.some((s) => s.all)
      ? { all: true }
      : { all: false, ids: [...new Set(scopes.flatMap((s) => (s.all ? [] : s.ids)))] };
    const positions: Array<{ mailboxId: string; cursorKey: number; after: number }> = [];
    for (const h of await this.repository.heads(scope)) {
      this.cursorKeys.set(h.mailboxId, h.cursorKey);
      let after = Infinity;
      for (const w of waiters) {
        const position = w.cursor.position(h.cursorKey);
        if (position < h.seq && position < after && w.watches(h.mailboxId)) after = position;
      }
      if (after !== Infinity) positions.push({ mailboxId: h.mailboxId, cursorKey: h.cursorKey, after });
    }
    await this.feed([...waiters], positions);
  }

  /** A doorbell rang for a mailbox: one pass over its new messages feeds all its parked waits. */
  private async scanMailbox(mailboxId: string, at: number | undefined): Promise<void> {
    const waiters = this.registry.messageWaiters(mailboxId);
    if (waiters.length === 0) return;
    const cursorKey = this.cursorKeys.get(mailboxId) ?? (await this.lookUpCursorKey(mailboxId));
    if (cursorKey === undefined) return;
    const after = Math.min(...waiters.map((w) => w.cursor.position(cursorKey)));
    await this.feed(waiters, [{ mailboxId, cursorKey, after }]);
    this.observeWakes('message', waiters, at);
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
    const shared = new SharedResults();
    for (const w of waiters) {
      w.settleIfMatched(shared);
      if (w.needsOwnScan && !w.settled)
        void this.ownScan([w]).then(
          () => w.settleIfMatched(),
          (err) => this.failed(err),
        );
    }
  }

  private async checkRequest(requestId: string, at: number | undefined): Promise<void> {
    const waiters = this.registry.requestWaiters(requestId);
    if (waiters.length === 0) return;
    const ids = [...new Set(waiters.flatMap((w) => w.spec.requestIds))];
    const rows = await this.repository.requests(ids, { all: true });
    for (const w of waiters) w.evaluate(rows);
    this.observeWakes('request', waiters, at);
  }

  /**
   * One statement for every parked wait of this process: where a mailbox moved past a wait's
   * position, or a request (or its delivery) reached an awaited state, the doorbell was lost: act as
   * if it rang.
   */
  private async safetyRecheck(): Promise<void> {
    try {
      const { heads, states, deliveries, ownedWaits, resolvedWaits, lapsedTokens, principalMailboxes } =
        await this.repository.probe(
          this.registry.watchedMailboxes(),
          this.registry.watchedRequests(),
          this.registry.watchedResults(),
          this.registry.watchedTokens(),
          this.ownership.countedOwner,
        );
      for (const [tokenId, reason] of lapsedTokens) this.endAccess(tokenId, reason);
      for (const [principalId, mailboxes] of principalMailboxes) this.endLostAccess(principalId, mailboxes);
      this.ownership.reconcileIfMiscounted(ownedWaits);
      this.ownership.ringResults(resolvedWaits, undefined);
      for (const head of heads) {
        this.cursorKeys.set(head.mailboxId, head.cursorKey);
        if (this.registry.messageWaiters(head.mailboxId).some((w) => behind(w, head))) {
          this.ringMailbox(head.mailboxId, undefined);
        }
      }
      for (const [requestId, state] of states) {
        const delivery = deliveries.get(requestId);
        if (this.registry.requestWaiters(requestId).some((w) => w.awaits(state, delivery))) {
          this.ringRequest(requestId, undefined);
        }
      }
      // A feed shows every request of its mailboxes, so no cheap probe can tell whether it missed a
      // doorbell: each feed re-reads once per re-check (its owner sends only what changed).
      for (const feed of this.registry.allRequestFeeds()) feed.ring();
    } catch (err) {
      this.failed(err);
    }
  }

  private ringMailbox(mailboxId: string, at: number | undefined): void {
    this.singleFlight(`m:${mailboxId}`, at, (bellAt) => this.scanMailbox(mailboxId, bellAt));
  }

  /** Feeds re-read on their own, single-flight per feed (see RequestFeedWaiter): ringing is cheap. */
  private ringFeeds(mailboxId: string): void {
    for (const feed of this.registry.requestFeeds(mailboxId)) feed.ring();
  }

  private ringRequest(requestId: string, at: number | undefined): void {
    this.singleFlight(`r:${requestId}`, at, (bellAt) => this.checkRequest(requestId, bellAt));
  }

  private async lookUpCursorKey(mailboxId: string): Promise<number | undefined> {
    const [head] = await this.repository.heads({ all: false, ids: [mailboxId] });
    if (head) this.cursorKeys.set(mailboxId, head.cursorKey);
    return head?.cursorKey;
  }

  /**
   * Per-key single flight: a doorbell during a running check marks it to run once more, so a burst
   * of commits costs at most two checks. `at` is the earliest commit time of the bells waiting.
   */
  private singleFlight(key: string, at: number | undefined, run: (at: number | undefined) => Promise<void>): void {
    this.checks.ring(key, at, run);
  }

  /** Wake latency: from the commit that rang (`at`) to now, for the waits this check settled. */
  private observeWakes(kind: string, waiters: readonly Waiter[], at: number | undefined): void {
    if (at === undefined) return;
    const seconds = Math.max(0, Date.now() - at) / 1000;
    for (const w of waiters) if (w.settled && !w.persistedId) this.metrics.wakeLatency.observe({ kind }, seconds);
  }

  /** Draining: every waiting client gets its shutdown answer; watches of persisted waits are dropped. */
  private shutdownAll(): void {
    for (const waiter of this.registry.all()) {
      if (isWatch(waiter)) this.drop(waiter);
      else waiter.finish(waiter.shutdown());
    }
  }

  /** Forgets the watch of a persisted wait without writing anything. */
  private drop(watch: MessageWaiter | RequestWaiter): void {
    clearTimeout(watch.timer);
    this.registry.remove(watch);
  }

  private failed(err: unknown): void {
    // The safety re-check will retry; the waits themselves stay parked.
    this.logger.error(err instanceof Error ? err : String(err));
  }
}

/** The reason of a revocation doorbell, which does not say it: an expired token expired, else it was revoked. */
function lapseReason(credential: Credential): AccessEndReason {
  return msUntil(credential.expiresAt) <= 0 ? 'token_expired' : 'token_revoked';
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
