import { hostname } from 'node:os';
import { Logger } from '@nestjs/common';
import { randomBase62 } from '../common/ids';
import { AppConfig } from '../config/app-config';
import { DoorbellListener } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';
import { AccessEndReason } from '../auth/credential-revocation';
import { CredentialRepository } from '../auth/credential.repository';
import { Caller, Credential } from '../kernel/caller';
import { PersistedWaitEntity } from './persisted-wait.entity';
import { LeaseTick, PersistedWaitRepository, WaitResolution } from './persisted-wait.repository';
import { ResolutionQueue } from './resolution-queue';
import { WaitRepository } from './wait.repository';
import { fromStoredSpec, WaitResult } from './wait-spec';
import { isWatch, MessageWaiter, msUntil, RequestWaiter, Waiter } from './waiters';
import { earliest } from './single-flight';
import { WaiterRegistry } from './waiter-registry';
import { WaitMetrics } from './waits.metrics';

/** Unowned waits claimed per statement. */
const CLAIM_BATCH = 500;
/** Waits whose results one query reads when resolution doorbells ring. */
const RESULT_READ_BATCH = 5000;
/** The single-flight keys of work done under the lease (see release). */
const LEASE_WORK = ['lease', 'claim', 'claimed', 'owned', 'reconcile'];
/**
 * Lease ticks per re-check period while other replicas hold leases: the lease is renewed (and the
 * others' leases checked) this often, so that a hung owner (alive, its connections open, so its
 * session stays in `pg_stat_activity`) is taken over within the re-check period, like a dead one.
 * A replica alone ticks once per period: nobody could take over from it.
 */
export const LEASE_TICKS_PER_RECHECK = 4;
/**
 * A lease lasts this many of its owner's tick periods: one late renewal is tolerated. A hung owner
 * renewed at most one tick before it hung; its lease lapses LEASE_TICKS ticks after that renewal,
 * and the next tick of another replica ends it and claims its waits: (LEASE_TICKS + 1) ticks, ¾ of
 * the re-check period.
 */
const LEASE_TICKS = 2;

/**
 * What the ownership borrows from the WaitEngine: its watches are ordinary waiters, parked,
 * checked, woken and dropped by the engine's one mechanism.
 */
export interface WatchHost {
  /** Brings waiters up to date with the database (one read of requests, one scan of messages). */
  catchUp(waiters: ReadonlyArray<MessageWaiter | RequestWaiter>): Promise<void>;
  /** Why a credential has lost its access, if it has (known without a query). */
  lapsed(credential: Credential): AccessEndReason | undefined;
  /** Forgets a watch without writing anything. */
  drop(watch: MessageWaiter | RequestWaiter): void;
  /** Runs `run` single-flight per key (the engine's, so a release can wait for the lease's work). */
  ring(key: string, at: number | undefined, run: (at: number | undefined) => Promise<void>): void;
  /** Resolves once the work of `key` is done. */
  settled(key: string): Promise<void>;
  observeWakes(kind: string, waiters: readonly Waiter[], at: number | undefined): void;
  failed(err: unknown): void;
}

/**
 * The ownership of persisted waits (websocket delivery, `wait_id`, tasks) by this replica. Each is
 * watched by one replica: the owner named in the wait's row, under a lease this process renews
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
export class PersistedWaitOwnership {
  /** Its lines keep the engine's name: operators find the lease where they always did. */
  private readonly logger = new Logger('WaitEngine');
  /**
   * This process's name as the owner of persisted waits: host, pid and a random part, so that an
   * operator can tell which process watches a wait, and a restarted process never inherits a lease.
   */
  readonly owner = `${hostname()
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, 64)}:${process.pid}:${randomBase62(6)}`;
  /** Whether other replicas held live leases at the last lease tick (then it ticks more often). */
  private peers = false;
  /** Between start() and the release of the lease (drain, shutdown). */
  private leasing = false;
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
    private readonly host: WatchHost,
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
  }

  /** The owner to count the waits of in a safety re-check: this process, while it holds its lease. */
  get countedOwner(): string | undefined {
    return this.leaseHeld ? this.owner : undefined;
  }

  /** Takes the lease: the first tick (in the background, so start-up does not wait) claims unowned waits. */
  start(): void {
    this.persisted.leaseOwner = this.owner;
    this.leaseHeld = false;
    this.leasing = true;
    this.ringLease();
  }

  /** The time between lease ticks: short while other replicas could take over from a hung one. */
  leaseTickMs(peers: boolean): number {
    return peers ? this.config.waitRecheckMs / LEASE_TICKS_PER_RECHECK : this.config.waitRecheckMs;
  }

  /** One beat of the engine's timer: a lease tick every re-check period, and every beat while others hold leases. */
  beat(period: boolean): void {
    if (period || this.peers) this.ringLease();
  }

  /**
   * Stops renewing, writes the outcomes still queued, and gives the lease up: this process's waits
   * become unowned at once and a doorbell has another replica claim them (no wait for a lapse).
   */
  async release(): Promise<void> {
    if (!this.leasing) return;
    this.leasing = false;
    this.persisted.leaseOwner = undefined;
    this.leaseHeld = false;
    // A tick or claim under way would take the lease or waits again after the release.
    for (const key of LEASE_WORK) await this.host.settled(key);
    await this.resolutions.idle();
    await this.persisted.release(this.owner).catch((err) => this.host.failed(err));
  }

  /**
   * A `wait_created` bell: stored by a replica that watches it itself, or unowned (then every
   * replica tries to claim it).
   */
  onWaitCreated(waitId: string, owner: string | undefined): void {
    if (owner === undefined) return this.ringClaim();
    if (owner !== this.owner) return;
    this.ownedToWatch.add(waitId);
    this.host.ring('owned', undefined, () => this.watchOwned());
  }

  ringLease(): void {
    this.host.ring('lease', undefined, () => this.leaseTick());
  }

  ringClaim(): void {
    if (this.leaseHeld) this.host.ring('claim', undefined, () => this.claimUnowned());
  }

  /** The safety re-check counted `ownedWaits` owned by this process: reconciled when watches differ. */
  reconcileIfMiscounted(ownedWaits: number): void {
    if (this.leaseHeld && ownedWaits !== this.registry.watchedPersisted().size) {
      this.host.ring('reconcile', undefined, () => this.reconcileOwned());
    }
  }

  /**
   * Resolution doorbells named these waits: the results of those this process has a watch or a
   * waiter for are read in one query when the current read is done (single flight). Waits of its
   * own batches still being written are left to batchWritten, which knows their results.
   */
  ringResults(waitIds: readonly string[], at: number | undefined): void {
    for (const id of waitIds) {
      if (this.resolutions.has(id)) continue;
      if (!this.registry.persistedWatch(id) && this.registry.resultWaiters(id).length === 0) continue;
      this.resultChecks.set(id, this.resultChecks.has(id) ? earliest(this.resultChecks.get(id), at) : at);
    }
    if (this.resultChecks.size > 0) this.host.ring('results', undefined, () => this.checkResults());
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
      for (const waiter of this.registry.all()) if (isWatch(waiter)) this.host.drop(waiter);
    }
    this.leaseHeld = true;
    if (tick.lapsedOwners.length > 0) {
      this.logger.log({ msg: 'took over the waits of lapsed wait leases', owners: tick.lapsedOwners });
    }
    // Watched, and further batches claimed, outside this flight: the next renewal must not wait.
    for (const wait of tick.claimed) this.claimedToWatch.set(wait.id, wait);
    if (this.claimedToWatch.size > 0) this.host.ring('claimed', undefined, () => this.watchClaimedByTicks());
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
   * watch, and one catch-up for all of them (see WaitEngine.catchUp).
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
      if (this.host.lapsed(caller)) {
        this.host.drop(waiter);
        continue;
      }
      void waiter.result.then((result) => this.resolvePersisted(waiter, result));
      filed.push({ waiter, caller, remainingMs });
    }
    // Checked before the deadlines are armed: a replica that starts (or takes over) after
    // `expires_at` must still find a match committed in time before it calls the wait timed out.
    await this.host.catchUp(filed.map((f) => f.waiter)).catch((err) => this.host.failed(err));
    for (const { waiter, caller, remainingMs } of filed) {
      if (waiter.settled || this.registry.persistedWatch(waiter.persistedId!) !== waiter) continue;
      // A token that expires first ends the watch then; the lapsed-credential sweep ends the wait.
      const expiresInMs = msUntil(caller.expiresAt);
      waiter.timer =
        expiresInMs < remainingMs
          ? setTimeout(() => this.host.drop(waiter), expiresInMs)
          : setTimeout(() => waiter.finish(waiter.timedOut()), remainingMs);
    }
  }

  /** Queues the outcome for the next batch write (ResolutionQueue); the watch is done. */
  private resolvePersisted(waiter: MessageWaiter | RequestWaiter, result: WaitResult): void {
    this.registry.remove(waiter);
    this.resolutions.add(waiter.persistedId!, result);
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
        if (watch && outcome?.status !== 'pending') this.host.drop(watch);
        const waiters = this.registry.resultWaiters(id);
        for (const w of waiters) w.evaluate(outcome);
        this.host.observeWakes('result', waiters, at);
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
      this.host.observeWakes('result', waiters, at);
    }
    this.ringResults(others, undefined);
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
    for (const watch of before) if (!owned.has(watch.persistedId!)) this.host.drop(watch);
    const watched = this.registry.watchedPersisted();
    const unwatched = [...owned].filter((id) => !watched.has(id) && !this.resolutions.has(id));
    await this.watchPending(await this.persisted.owned(this.owner, unwatched));
  }
}
