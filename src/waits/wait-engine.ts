import { hostname } from 'node:os';
import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { randomBase62 } from '../common/ids';
import { AppConfig } from '../config/app-config';
import { notFound } from '../kernel/errors';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';
import { MessageCursor } from '../mail/message-cursor';
import { Caller, Credential, losesMailbox, MailboxAccess } from '../kernel/caller';
import { AccessEndReason } from '../auth/credential-revocation';
import { CredentialRepository } from '../auth/credential.repository';
import { PersistedWaitEntity } from './persisted-wait.entity';
import { LeaseTick, PersistedWaitRepository, WaitResolution } from './persisted-wait.repository';
import { ResolutionQueue } from './resolution-queue';
import { MailboxHead, WaitRepository } from './wait.repository';
import {
  accessEndedError,
  fromStoredSpec,
  MessageWaitSpec,
  RequestWaitSpec,
  WaitDelivery,
  WaitResult,
  WaitSpec,
} from './wait-spec';
import {
  MessageRow,
  MessageWaiter,
  RequestFeedWaiter,
  RequestWaiter,
  ResultWaiter,
  SharedResults,
  Waiter,
} from './waiters';
import { earliest, SingleFlight } from './single-flight';
import { WaiterRegistry } from './waiter-registry';
import { WaitMetrics } from './waits.metrics';

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
/** Unowned waits claimed per statement. */
const CLAIM_BATCH = 500;
/** Waits whose results one query reads when resolution doorbells ring. */
const RESULT_READ_BATCH = 5000;
/** The single-flight keys of work done under the lease (see releaseLease). */
const LEASE_WORK = ['lease', 'claim', 'claimed', 'owned', 'reconcile'];
/**
 * Lease ticks per re-check period while other replicas hold leases: the lease is renewed (and the
 * others' leases checked) this often, so that a hung owner (alive, its connections open, so its
 * session stays in `pg_stat_activity`) is taken over within the re-check period, like a dead one.
 * A replica alone ticks once per period: nobody could take over from it.
 */
const LEASE_TICKS_PER_RECHECK = 4;
/**
 * A lease lasts this many of its owner's tick periods: one late renewal is tolerated. A hung owner
 * renewed at most one tick before it hung; its lease lapses LEASE_TICKS ticks after that renewal,
 * and the next tick of another replica ends it and claims its waits: (LEASE_TICKS + 1) ticks, ¾ of
 * the re-check period.
 */
const LEASE_TICKS = 2;
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
 * replica each: the owner named in the wait's row, under a lease this process renews
 * LEASE_TICKS_PER_RECHECK times per re-check period while other replicas hold leases, once when it
 * is alone (one transaction, however many waits it owns). The same lease tick ends the leases of
 * processes that are gone (their doorbell listener's session left `pg_stat_activity`: a SIGKILLed
 * or crashed replica) or that lapsed (a hung one: alive, its sessions open), and claims unowned
 * waits, so a dead or hung owner's waits are watched again within ALCARTA_WAIT_RECHECK_SECONDS; a
 * draining replica releases its lease at once. Waits claimed together catch up together (see
 * watch). The owner writes outcomes in batches (see ResolutionQueue), only for waits it still owns
 * (a hung owner that resumes writes nothing over its successor's results), answers whoever waits
 * here from the batch it wrote, and the resolution doorbell wakes whoever waits for those results
 * on the other replicas (a `wait_id` poll, a websocket, tasks/result).
 */
@Injectable()
export class WaitEngine implements DoorbellSubscriber, OnModuleDestroy {
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
  /** Whether other replicas held live leases at the last lease tick (then it ticks more often). */
  private peers = false;
  /** Between start() and the release of the lease (drain, shutdown). */
  private leasing = false;
  /**
   * This process's name as the owner of persisted waits: host, pid and a random part, so that an
   * operator can tell which process watches a wait, and a restarted process never inherits a lease.
   */
  readonly owner = `${hostname()
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, 64)}:${process.pid}:${randomBase62(6)}`;
  /** Whether this process holds its lease (so a renewal that had to take it anew means it was lost). */
  private leaseHeld = false;
  private readonly resolutions: ResolutionQueue;
  /** Waits named by resolution doorbells, to read in one query (with the earliest bell's commit time). */
  private readonly resultChecks = new Map<string, number | undefined>();
  /** Waits its lease ticks claimed, to watch in one pass outside the lease's flight. */
  private readonly claimedToWatch = new Map<string, PersistedWaitEntity>();
  /** Waits this process was told it owns (its own `wait_created` bells), to watch in one pass. */
  private readonly ownedToWatch = new Set<string>();

  constructor(
    private readonly registry: WaiterRegistry,
    private readonly repository: WaitRepository,
    private readonly persisted: PersistedWaitRepository,
    private readonly credentials: CredentialRepository,
    private readonly config: AppConfig,
    private readonly drain: DrainState,
    private readonly metrics: WaitMetrics,
    private readonly listener: DoorbellListener,
  ) {
    this.resolutions = new ResolutionQueue(persisted, this.owner, metrics, config.dbPoolSize, (batch, resolved) =>
      this.batchWritten(batch, resolved),
    );
    listener.subscribe(this);
    drain.onDrain(async () => {
      this.shutdownAll();
      await this.releaseLease();
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
      if (period || this.peers) this.ringLease();
      if (period) void this.safetyRecheck();
    }, this.leaseTickMs(true));
    this.safetyTimer.unref();
    this.persisted.leaseOwner = this.owner;
    this.leaseHeld = false;
    this.leasing = true;
    this.ringLease();
  }

  /** The time between lease ticks: short while other replicas could take over from a hung one. */
  private leaseTickMs(peers: boolean): number {
    return peers ? this.config.waitRecheckMs / LEASE_TICKS_PER_RECHECK : this.config.waitRecheckMs;
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.safetyTimer);
    this.shutdownAll();
    await this.releaseLease();
  }

  /**
   * Stops renewing, writes the outcomes still queued, and gives the lease up: this process's waits
   * become unowned at once and a doorbell has another replica claim them (no wait for a lapse).
   */
  private async releaseLease(): Promise<void> {
    if (!this.leasing) return;
    this.leasing = false;
    this.persisted.leaseOwner = undefined;
    this.leaseHeld = false;
    // A tick or claim under way would take the lease or waits again after the release.
    for (const key of LEASE_WORK) await this.checks.settled(key);
    await this.resolutions.idle();
    await this.persisted.release(this.owner).catch((err) => this.failed(err));
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

  private ringLease(): void {
    this.singleFlight('lease', undefined, () => this.leaseTick());
  }

  /**
   * Renews the lease, ends lapsed ones and claims unowned waits (more batches while they come full).
   * One transaction, LEASE_TICKS_PER_RECHECK times per re-check period while other replicas hold
   * leases, else once.
   * A lease that had to be taken anew was lost (this process stalled past it, and another replica
   * released its waits): every watch is dropped, the claim below takes back what is still unowned.
   */
  private async leaseTick(): Promise<void> {
    if (!this.leasing || this.drain.isDraining) return;
    const tick = await this.persisted.leaseTick(
      this.owner,
      this.listener.session,
      (others) => LEASE_TICKS * this.leaseTickMs(others),
      CLAIM_BATCH,
    );
    this.peers = tick.peers;
    this.afterLeaseTick(tick);
  }

  private afterLeaseTick(tick: LeaseTick): void {
    // Released meanwhile (draining): the release, which waited for this tick, has the last word.
    if (!this.leasing) return;
    if (tick.renewedAfterLoss && this.leaseHeld) {
      this.logger.warn({
        msg: 'wait lease was lost (it lapsed); watching only what is claimed again',
        owner: this.owner,
      });
      this.metrics.leaseLosses.inc();
      this.claimedToWatch.clear();
      for (const waiter of this.registry.all()) if (isWatch(waiter)) this.drop(waiter);
    }
    this.leaseHeld = true;
    if (tick.lapsedOwners.length > 0) {
      this.logger.log({ msg: 'took over the waits of lapsed wait leases', owners: tick.lapsedOwners });
    }
    // Watched, and further batches claimed, outside this flight: the next renewal must not wait.
    for (const wait of tick.claimed) this.claimedToWatch.set(wait.id, wait);
    if (this.claimedToWatch.size > 0) this.singleFlight('claimed', undefined, () => this.watchClaimedByTicks());
    if (tick.claimed.length === CLAIM_BATCH) this.ringClaim();
  }

  private async watchClaimedByTicks(): Promise<void> {
    const claimed = [...this.claimedToWatch.values()];
    this.claimedToWatch.clear();
    await this.watchClaimed(claimed);
  }

  /** Claims unowned pending waits, batch after batch, and watches them. */
  private async claimUnowned(): Promise<void> {
    for (;;) {
      if (!this.leaseHeld || this.drain.isDraining) return;
      const claimed = await this.persisted.claim(this.owner, CLAIM_BATCH);
      await this.watchClaimed(claimed);
      if (claimed.length < CLAIM_BATCH) return;
    }
  }

  private async watchClaimed(claimed: PersistedWaitEntity[]): Promise<void> {
    if (claimed.length === 0) return;
    this.metrics.claims.inc(claimed.length);
    await this.watchPending(claimed);
  }

  /** Its own `wait_created` bells: the waits this process stored and owns, watched in one pass. */
  private async watchOwned(): Promise<void> {
    const ids = [...this.ownedToWatch];
    this.ownedToWatch.clear();
    await this.watchPending(await this.persisted.owned(this.owner, ids));
  }

  /** Starts watching the given pending waits (owned by this process) that it does not watch yet. */
  private async watchPending(pending: readonly PersistedWaitEntity[]): Promise<void> {
    if (this.drain.isDraining) return;
    const watched = this.registry.watchedPersisted();
    const waits = pending.filter((wait) => !watched.has(wait.id) && !this.resolutions.has(wait.id));
    // Waits of a credential without access (a revoked or expired token) are not watched any more.
    const callers = await this.credentials.usable(waits.map((wait) => wait.tokenId));
    await this.watch(
      waits.flatMap((wait) => {
        const caller = callers.get(wait.tokenId);
        return caller ? [{ wait, caller }] : [];
      }),
    );
  }

  /**
   * The engine's own watches of persisted waits: ordinary waiters whose outcome (a match, or the
   * timeout at `expires_at`) is written to the database instead of answering a request. A shutdown
   * only drops a watch: the wait stays pending for the other replicas. Many at once (a claim takes
   * up to CLAIM_BATCH) cost a few queries, not a few per wait: one read of the requests they
   * watch, and one catch-up for all of them (see catchUp).
   */
  private async watch(waits: ReadonlyArray<{ wait: PersistedWaitEntity; caller: Caller }>): Promise<void> {
    const requestIds = new Set(
      waits.flatMap(({ wait }) => (wait.spec.kind === 'request' ? wait.spec.request_ids : [])),
    );
    const initial = requestIds.size > 0 ? await this.repository.requests([...requestIds], { all: true }) : [];
    const filed: Array<{ waiter: MessageWaiter | RequestWaiter; caller: Caller; remainingMs: number }> = [];
    for (const { wait, caller } of waits) {
      if (this.registry.persistedWatch(wait.id)) continue;
      const remainingMs = Math.max(0, wait.expiresAt.getTime() - Date.now());
      const spec = fromStoredSpec(wait.spec, caller, remainingMs);
      const waiter =
        spec.kind === 'message'
          ? new MessageWaiter(spec, spec.since!, 'persisted')
          : new RequestWaiter(spec, initial, 'persisted');
      waiter.persistedId = wait.id;
      this.registry.add(waiter);
      // Filed first, then checked: a revocation whose doorbell came during the reads above is seen.
      if (this.lapsed(caller)) {
        this.drop(waiter);
        continue;
      }
      void waiter.result.then((result) => this.resolvePersisted(waiter, result));
      filed.push({ waiter, caller, remainingMs });
    }
    // Checked before the deadlines are armed: a replica that starts (or takes over) after
    // `expires_at` must still find a match committed in time before it calls the wait timed out.
    await this.catchUp(filed.map((f) => f.waiter)).catch((err) => this.failed(err));
    for (const { waiter, caller, remainingMs } of filed) {
      if (waiter.settled || this.registry.persistedWatch(waiter.persistedId!) !== waiter) continue;
      // A token that expires first ends the watch then; the lapsed-credential sweep ends the wait.
      const expiresInMs = msUntil(caller.expiresAt);
      waiter.timer =
        expiresInMs < remainingMs
          ? setTimeout(() => this.drop(waiter), expiresInMs)
          : setTimeout(() => waiter.finish(waiter.timedOut()), remainingMs);
    }
  }

  /** Queues the outcome for the next batch write (ResolutionQueue); the watch is done. */
  private resolvePersisted(waiter: MessageWaiter | RequestWaiter, result: WaitResult): void {
    this.registry.remove(waiter);
    this.resolutions.add(waiter.persistedId!, result);
  }

  /**
   * Resolution doorbells named these waits: the results of those this process has a watch or a
   * waiter for are read in one query when the current read is done (single flight). Waits of its
   * own batches still being written are left to batchWritten, which knows their results.
   */
  private ringResults(waitIds: readonly string[], at: number | undefined): void {
    for (const id of waitIds) {
      if (this.resolutions.has(id)) continue;
      if (!this.registry.persistedWatch(id) && this.registry.resultWaiters(id).length === 0) continue;
      this.resultChecks.set(id, this.resultChecks.has(id) ? earliest(this.resultChecks.get(id), at) : at);
    }
    if (this.resultChecks.size > 0) this.singleFlight('results', undefined, () => this.checkResults());
  }

  /**
   * Fixed results: a watch of a wait no longer pending is dropped, and whoever waits for it answered.
   * One query per RESULT_READ_BATCH waits, reading only their status and result.
   */
  private async checkResults(): Promise<void> {
    while (this.resultChecks.size > 0) {
      const batch = [...this.resultChecks].slice(0, RESULT_READ_BATCH);
      for (const [id] of batch) this.resultChecks.delete(id);
      const outcomes = await this.persisted.outcomes(batch.map(([id]) => id));
      for (const [id, at] of batch) {
        const outcome = outcomes.get(id) ?? null;
        const watch = this.registry.persistedWatch(id);
        if (watch && outcome?.status !== 'pending') this.drop(watch);
        const waiters = this.registry.resultWaiters(id);
        for (const w of waiters) w.evaluate(outcome);
        this.observeWakes('result', waiters, at);
      }
    }
  }

  /**
   * A batch of this process's outcomes is done. Whoever waits here for a wait it resolved is
   * answered with that result at once, no read needed (its doorbell still rings for the other
   * replicas). The others were resolved first by someone else, or the batch failed: their results
   * are read like any doorbell's (ringResults passed over their bells while they were in flight).
   */
  private batchWritten(batch: readonly WaitResolution[], resolved: ReadonlySet<string>): void {
    const at = Date.now();
    const others: string[] = [];
    for (const { waitId, result } of batch) {
      if (!resolved.has(waitId)) {
        others.push(waitId);
        continue;
      }
      const waiters = this.registry.resultWaiters(waitId);
      for (const w of waiters) w.evaluate({ status: 'resolved', result });
      this.observeWakes('result', waiters, at);
    }
    this.ringResults(others, undefined);
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
        if (bell.owner === undefined) return this.ringClaim();
        if (bell.owner !== this.owner) return;
        this.ownedToWatch.add(bell.waitId);
        return this.singleFlight('owned', undefined, () => this.watchOwned());
      case 'waits_released':
        return this.ringClaim();
      case 'wait_resolved':
        return this.ringResults([bell.waitId], bell.at);
      case 'waits_resolved':
        return this.ringResults(bell.waitIds, bell.at);
    }
  }

  onListenerReconnected(): void {
    void this.safetyRecheck();
    // The lease names the listener's session, which is a new one now.
    this.ringLease();
  }

  private ringClaim(): void {
    if (this.leaseHeld) this.singleFlight('claim', undefined, () => this.claimUnowned());
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
          this.leaseHeld ? this.owner : undefined,
        );
      for (const [tokenId, reason] of lapsedTokens) this.endAccess(tokenId, reason);
      for (const [principalId, mailboxes] of principalMailboxes) this.endLostAccess(principalId, mailboxes);
      if (this.leaseHeld && ownedWaits !== this.registry.watchedPersisted().size) {
        this.singleFlight('reconcile', undefined, () => this.reconcileOwned());
      }
      this.ringResults(resolvedWaits, undefined);
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

  /**
   * The safety net for lost `wait_created` bells, failed batch writes and watches dropped while the
   * wait stayed pending: what this process owns and what it watches are made the same. (Rare: the
   * re-check only counts, this reads the ids when the counts differ.)
   */
  private async reconcileOwned(): Promise<void> {
    if (!this.leaseHeld) return;
    // Only watches that predate the read can be stale; one started meanwhile was claimed after it.
    const before = this.registry.all().filter(isWatch);
    const owned = new Set(await this.persisted.ownedIds(this.owner));
    for (const watch of before) if (!owned.has(watch.persistedId!)) this.drop(watch);
    const watched = this.registry.watchedPersisted();
    const unwatched = [...owned].filter((id) => !watched.has(id) && !this.resolutions.has(id));
    await this.watchPending(await this.persisted.owned(this.owner, unwatched));
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

/** Milliseconds until `at` (negative once past); infinite for no time at all. */
function msUntil(at: Date | null): number {
  return at ? at.getTime() - Date.now() : Infinity;
}

/** The reason of a revocation doorbell, which does not say it: an expired token expired, else it was revoked. */
function lapseReason(credential: Credential): AccessEndReason {
  return msUntil(credential.expiresAt) <= 0 ? 'token_expired' : 'token_revoked';
}

/** Whether this is the engine's own watch of a persisted wait (dropped, never answered). */
function isWatch(waiter: Waiter): waiter is MessageWaiter | RequestWaiter {
  return (waiter instanceof MessageWaiter || waiter instanceof RequestWaiter) && waiter.persistedId !== undefined;
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
