import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Logger } from '@nestjs/common';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { DrainState } from '../lifecycle/drain-state';

/**
 * Without any doorbell or timer, a replica still looks for due work this often (a doorbell lost
 * while the listener was down). Idle cost: two small indexed queries per interval.
 */
const SAFETY_POLL_MS = 60_000;
/** A due row that another replica is claiming right now is not looked at again sooner than this. */
const MIN_REARM_MS = 200;

/**
 * What one claim of a pass found: `more` (a full batch: claim again at once), `caught_up` (nothing
 * more is due now: sleep until the next due time) or `full` (no room for more work: the end of a
 * job in flight wakes the loop again).
 */
export type ClaimResult = 'more' | 'caught_up' | 'full';

/** The part of a worker that differs: what it claims and starts, and when its next row falls due. */
export interface DueWork {
  /** Names the worker in the log line of a pass that failed (`outbox worker could not look for due mail`). */
  readonly what: string;
  /** Claims due rows (SKIP LOCKED) and starts or does their work. */
  claimAndLaunch(): Promise<ClaimResult>;
  /** Milliseconds until the next row falls due (on any replica); undefined: none. */
  msUntilNextDue(): Promise<number | undefined>;
  /** The doorbell(s) that announce new work (default `outbox`). */
  readonly doorbell?: Doorbell['kind'] | readonly Doorbell['kind'][];
  /** On drain, after the loop stopped claiming: what the worker still finishes (a promise delays the drain). */
  drained?(): void | Promise<void>;
}

/** Who holds a claim (`claimed_by`): this process, distinguishable from its own restarts. */
export function claimantId(): string {
  return `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
}

/**
 * The schedule of a leased-work worker of this replica (the outbox, the approval mails and the
 * webhooks; every replica runs them). It sleeps until something can be due: the worker's doorbell
 * (`outbox` unless it names another: work was queued or re-queued, on any replica), a timer at the next due time (a retry, or a lease that lapses), or
 * the safety poll. A wake-up starts a pass that claims until caught up; passes never overlap, and a
 * wake-up during a pass makes it run once more. On drain it stops claiming and lets the worker
 * finish what it holds (`drained`).
 */
export class DueWorkLoop implements DoorbellSubscriber {
  private started = false;
  private stopping = false;
  private pass: Promise<void> | undefined;
  private passAgain = false;
  private dueTimer: NodeJS.Timeout | undefined;
  private safetyTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly work: DueWork,
    private readonly listener: DoorbellListener,
    private readonly drain: DrainState,
    private readonly logger: Logger,
  ) {}

  get isStopping(): boolean {
    return this.stopping;
  }

  /** Starts watching for work (once). */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.listener.subscribe(this);
    this.drain.onDrain(() => {
      void this.stop();
      return this.work.drained?.();
    });
    this.safetyTimer = setInterval(() => this.wake(), SAFETY_POLL_MS);
    this.safetyTimer.unref();
    this.wake();
  }

  onDoorbell(bell: Doorbell): void {
    const wanted = this.work.doorbell ?? 'outbox';
    if (typeof wanted === 'string' ? bell.kind === wanted : wanted.includes(bell.kind)) this.wake();
  }

  onListenerReconnected(): void {
    this.wake();
  }

  /** Looks for due work now; a wake-up during a pass makes the pass run once more. */
  wake(): void {
    if (!this.started || this.stopping) return;
    if (this.pass) {
      this.passAgain = true;
      return;
    }
    this.pass = this.claimUntilCaughtUp()
      .catch((err: Error) => {
        // The database may be down: the safety poll tries again.
        this.logger.warn({ msg: `${this.work.what} could not look for due mail`, error: err.message });
      })
      .finally(() => {
        this.pass = undefined;
        if (this.passAgain) {
          this.passAgain = false;
          this.wake();
        }
      });
  }

  /** No more passes or timers; resolves when the pass in progress (if any) has ended. */
  stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.dueTimer);
    clearInterval(this.safetyTimer);
    return this.pass ?? Promise.resolve();
  }

  private async claimUntilCaughtUp(): Promise<void> {
    for (;;) {
      if (this.stopping) return;
      const result = await this.work.claimAndLaunch();
      if (result === 'full') return;
      if (result === 'caught_up') break;
    }
    await this.armDueTimer();
  }

  /** Sleeps until the next row falls due (on any replica), or the safety poll. */
  private async armDueTimer(): Promise<void> {
    const ms = await this.work.msUntilNextDue();
    clearTimeout(this.dueTimer);
    if (ms === undefined || this.stopping) return;
    this.dueTimer = setTimeout(() => this.wake(), Math.min(Math.max(ms, MIN_REARM_MS), SAFETY_POLL_MS));
    this.dueTimer.unref();
  }
}
