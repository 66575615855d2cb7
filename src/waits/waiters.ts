import { RequestState } from '../approvals/approval-request.entity';
import { RecordedApproval } from '../approvals/approval-policy';
import { Caller, Credential } from '../kernel/caller';
import { AccessEndReason } from '../auth/credential-revocation';
import { DeliveryEventPayload, RequestEventPayload } from '../events/event-log';
import { MessageAuthentication } from '../mail/message-authentication';
import { MessageCursor } from '../mail/message-cursor';
import { DeliveryView } from '../outbox/delivery.views';
import { DeliveryStatus } from '../outbox/outbound-delivery.entity';
import { WaitOutcome } from './persisted-wait.entity';
import { isAccessEnded, MessageWaitSpec, RequestWaitSpec, WaitDelivery, WaitResult, WatchedRequest } from './wait-spec';

/** At most this many events in one result (docs/agents.md, "Waits"). */
export const MAX_EVENTS = 100;

/** A message as the wait engine scans it: just what matching and the event need. */
export interface MessageRow {
  id: string;
  mailboxId: string;
  cursorKey: number;
  seq: number;
  direction: 'inbound' | 'outbound';
  from: string;
  subject: string;
  receivedAt: Date;
  authentication: MessageAuthentication;
  fromVerified: boolean;
}

export interface RequestRow {
  id: string;
  state: RequestState;
  /** The request's latest transition from the event log (creation counts). */
  latest: RequestEventPayload;
  /** The delivery of an approved email, and its latest status change from the event log. */
  delivery: DeliveryView | undefined;
  latestDelivery: DeliveryEventPayload | undefined;
  /** Under a quorum above one: the approvals so far (the one completing it included). */
  approvals?: RecordedApproval[];
}

/** A request as the `requests` of a request-wait result show it. */
export function watchedRequest(row: RequestRow): WatchedRequest {
  return {
    request_id: row.id,
    state: row.state,
    ...(row.approvals && { approvals: row.approvals }),
    ...(row.delivery && { delivery: row.delivery }),
  };
}

/**
 * A parked wait: the few bytes that must stay in memory while nothing happens (spec, position,
 * the promise to settle). Its state only moves forward, in synchronous steps, so scans that
 * overlap (a doorbell during the initial check) cannot make it skip or repeat anything.
 */
export abstract class Waiter {
  readonly result: Promise<WaitResult>;
  private settle!: (result: WaitResult) => void;
  settled = false;
  timer: NodeJS.Timeout | undefined;
  /** Set for the engine's watch of a persisted wait: its result goes to the database. */
  persistedId: string | undefined;
  /** Set when the wait ended because its token lost its access: there is no result for anyone. */
  accessEnded: AccessEndReason | undefined;

  constructor(readonly delivery: WaitDelivery) {
    this.result = new Promise((resolve) => (this.settle = resolve));
  }

  /** The token the wait acts for. */
  abstract readonly credential: Credential;

  finish(result: WaitResult): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.settle(result);
  }

  /** Ends the wait without a result: whoever waits gets an `unauthorized` error (see accessEndedError). */
  endAccess(reason: AccessEndReason): void {
    if (this.settled) return;
    this.accessEnded = reason;
    this.finish(this.timedOut());
  }

  abstract timedOut(): WaitResult;
  abstract shutdown(): WaitResult;
}

/**
 * The results of one feed pass, built once for all the waiters it settles: each row's event is one
 * object, and waiters that end with the same matches at the same position share one result object
 * (a commit into a mailbox with many waiters at the head settles them all alike). Results are never
 * modified after they are built, so whoever answers them can serialise a shared one once (see
 * stringifyOnce).
 */
export class SharedResults {
  private readonly events = new Map<MessageRow, object>();
  private readonly results = new Map<string, WaitResult>();

  matched(rows: readonly MessageRow[], cursor: MessageCursor): WaitResult {
    const nextCursor = cursor.toString();
    const key = `${nextCursor} ${rows.map((r) => r.id).join(' ')}`;
    let result = this.results.get(key);
    if (!result) {
      result = {
        matched: true,
        timed_out: false,
        shutdown: false,
        events: rows.map((r) => this.event(r)),
        next_cursor: nextCursor,
      };
      this.results.set(key, result);
    }
    return result;
  }

  private event(row: MessageRow): object {
    let event = this.events.get(row);
    if (!event) this.events.set(row, (event = messageEvent(row)));
    return event;
  }
}

export class MessageWaiter extends Waiter {
  /** The rows matched so far (their events are built when it settles). */
  private matches: MessageRow[] = [];
  /** Set when a scan could not feed this waiter contiguously; it then needs a scan of its own. */
  needsOwnScan = false;

  constructor(
    readonly spec: MessageWaitSpec,
    public cursor: MessageCursor,
    delivery: WaitDelivery = 'poll',
  ) {
    super(delivery);
  }

  get credential(): Credential {
    return this.spec.caller;
  }

  /** Mailbox ids whose doorbells concern this waiter, or '*' for every mailbox. */
  get keys(): string[] {
    if (this.spec.mailboxId) return [this.spec.mailboxId];
    const access = this.spec.caller.mailboxAccess;
    return access.all ? ['*'] : [...access.ids];
  }

  watches(mailboxId: string): boolean {
    return this.spec.mailboxId ? this.spec.mailboxId === mailboxId : this.spec.caller.canSeeMailbox(mailboxId);
  }

  get full(): boolean {
    return this.matches.length >= (this.spec.maxEvents ?? MAX_EVENTS);
  }

  /**
   * Consumes rows of one mailbox in sequence order. Rows at or below the waiter's position were
   * seen already and are skipped; a row beyond the next expected position means this scan started
   * too late for this waiter (it needs its own). Stops when it is full, leaving the position
   * at the last match so that nothing after it is skipped.
   */
  consume(rows: readonly MessageRow[]): void {
    if (this.settled) return;
    for (const row of rows) {
      if (this.full) return;
      const position = this.cursor.position(row.cursorKey);
      if (row.seq <= position) continue;
      if (row.seq !== position + 1) {
        this.needsOwnScan = true;
        return;
      }
      if (this.matchesRow(row)) this.matches.push(row);
      this.cursor = this.cursor.advancedTo([[row.cursorKey, row.seq]]);
    }
  }

  /** Settles with the matches collected so far, if there are any (a result `shared` with its pass's others). */
  settleIfMatched(shared: SharedResults = new SharedResults()): void {
    if (this.matches.length > 0 && !this.settled) this.finish(shared.matched(this.matches, this.cursor));
  }

  timedOut(): WaitResult {
    return { matched: false, timed_out: true, shutdown: false, events: [], next_cursor: this.cursor.toString() };
  }

  shutdown(): WaitResult {
    return { matched: false, timed_out: false, shutdown: true, events: [], next_cursor: this.cursor.toString() };
  }

  private matchesRow(row: MessageRow): boolean {
    return (
      row.direction === 'inbound' &&
      (this.spec.from === undefined || row.from.toLowerCase() === this.spec.from) &&
      (this.spec.subjectContains === undefined || row.subject.toLowerCase().includes(this.spec.subjectContains)) &&
      (!this.spec.fromVerifiedOnly || row.fromVerified)
    );
  }
}

export class RequestWaiter extends Waiter {
  private states: WatchedRequest[];

  constructor(
    readonly spec: RequestWaitSpec,
    initial: readonly RequestRow[],
    delivery: WaitDelivery = 'poll',
  ) {
    super(delivery);
    const byId = new Map(initial.map((r) => [r.id, r]));
    this.states = spec.requestIds.filter((id) => byId.has(id)).map((id) => watchedRequest(byId.get(id)!));
  }

  get credential(): Credential {
    return this.spec.caller;
  }

  get keys(): string[] {
    return this.spec.requestIds;
  }

  /** Whether a request in `state` whose delivery has `delivery` (if any) is what this wait awaits. */
  awaits(state: RequestState, delivery: DeliveryStatus | undefined): boolean {
    return this.spec.states.has(state) || this.awaitsDelivery(delivery);
  }

  /**
   * Level-triggered: settles as soon as any listed request is in one of the awaited states, or its
   * delivery in one of the awaited delivery states. `rows` holds the current truth for (some of)
   * the listed requests. Each match brings its latest event: the delivery's status change when
   * the delivery matched (it is always the later one), else the request's transition.
   */
  evaluate(rows: readonly RequestRow[]): void {
    if (this.settled) return;
    const byId = new Map(rows.map((r) => [r.id, r]));
    this.states = this.states.map((s) => {
      const row = byId.get(s.request_id);
      return row ? watchedRequest(row) : s;
    });
    const hits = this.spec.requestIds
      .map((id) => byId.get(id))
      .filter((r): r is RequestRow => r !== undefined && this.awaits(r.state, r.delivery?.status));
    if (hits.length === 0) return;
    this.finish({
      matched: true,
      timed_out: false,
      shutdown: false,
      events: hits.map((r) => (this.awaitsDelivery(r.delivery?.status) ? (r.latestDelivery ?? r.latest) : r.latest)),
      requests: this.states,
    });
  }

  timedOut(): WaitResult {
    return { matched: false, timed_out: true, shutdown: false, events: [], requests: this.states };
  }

  shutdown(): WaitResult {
    return { matched: false, timed_out: false, shutdown: true, events: [], requests: this.states };
  }

  private awaitsDelivery(delivery: DeliveryStatus | undefined): boolean {
    return delivery !== undefined && this.spec.deliveryStates.has(delivery);
  }
}

/**
 * Waits for the fixed result of a persisted wait: a `wait_id` poll, or an open websocket. What a
 * timeout or a shutdown answers depends on who waits, so the caller supplies those results.
 */
export class ResultWaiter extends Waiter {
  constructor(
    readonly waitId: string,
    readonly kind: 'message' | 'request',
    /** The token the persisted wait belongs to (only that token can wait for its result). */
    readonly credential: Credential,
    delivery: WaitDelivery,
    private readonly onTimeout: () => WaitResult,
    private readonly onShutdown: () => WaitResult,
  ) {
    super(delivery);
  }

  get keys(): string[] {
    return [this.waitId];
  }

  evaluate(wait: WaitOutcome | null): void {
    // Deleted (its task expired and was purged): nothing will ever resolve it, so the caller must
    // look again now rather than block until its own deadline.
    if (wait === null) return this.finish(this.timedOut());
    if (wait.status !== 'resolved' || !wait.result) return;
    if (isAccessEnded(wait.result)) this.endAccess(wait.result.reason);
    else this.finish(wait.result);
  }

  timedOut(): WaitResult {
    return this.onTimeout();
  }

  shutdown(): WaitResult {
    return this.onShutdown();
  }
}

function messageEvent(row: MessageRow) {
  return {
    type: 'message_received',
    mailbox_id: row.mailboxId,
    message_id: row.id,
    from: row.from,
    subject: row.subject,
    received_at: row.receivedAt.toISOString(),
    authentication: row.authentication,
    from_verified: row.fromVerified,
  };
}

/**
 * A live feed of the requests of some mailboxes (the console's pending list, docs/approvers.md): unlike the
 * other waiters it does not settle when something happens. Each `request` doorbell of one of its
 * mailboxes (and each safety re-check, which cannot tell what a lost doorbell would have said)
 * calls `onRing`, which re-reads what it shows. It settles only when the feed ends: its deadline,
 * the client going away, the replica draining, or its token losing its access. While parked it
 * holds only its keys and the callback.
 */
export class RequestFeedWaiter extends Waiter {
  constructor(
    readonly caller: Caller,
    /** One mailbox, or undefined for every mailbox the caller reaches. */
    private readonly mailboxId: string | undefined,
    private readonly onRing: () => void,
  ) {
    super('stream');
  }

  get credential(): Credential {
    return this.caller;
  }

  /** Mailbox ids whose `request` doorbells concern this feed, or '*' for every mailbox. */
  get keys(): string[] {
    if (this.mailboxId) return [this.mailboxId];
    const access = this.caller.mailboxAccess;
    return access.all ? ['*'] : [...access.ids];
  }

  watches(mailboxId: string): boolean {
    return this.mailboxId ? this.mailboxId === mailboxId : this.caller.canSeeMailbox(mailboxId);
  }

  ring(): void {
    if (!this.settled) this.onRing();
  }

  timedOut(): WaitResult {
    return { matched: false, timed_out: true, shutdown: false, events: [] };
  }

  shutdown(): WaitResult {
    return { matched: false, timed_out: false, shutdown: true, events: [] };
  }
}

/** Milliseconds until `at` (negative once past); infinite for no time at all. */
export function msUntil(at: Date | null): number {
  return at ? at.getTime() - Date.now() : Infinity;
}

/** Whether this is the engine's own watch of a persisted wait (dropped, never answered). */
export function isWatch(waiter: Waiter): waiter is MessageWaiter | RequestWaiter {
  return (waiter instanceof MessageWaiter || waiter instanceof RequestWaiter) && waiter.persistedId !== undefined;
}
