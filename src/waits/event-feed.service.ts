import { Injectable } from '@nestjs/common';
import { RequestState, TERMINAL_STATES } from '../approvals/approval-request.entity';
import { Caller } from '../kernel/caller';
import { notFound } from '../kernel/errors';
import { DecisionCursor, RequestFeed } from '../events/decision-cursor';
import { DecisionRow, EventRepository } from '../events/event.repository';
import { WaitService } from './wait.service';
import { MAX_EVENTS } from './waiters';

/** One event of a feed page: a stable id (for de-duplication), when it happened, its payload. */
export interface FeedEvent {
  id: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/**
 * One page of a feed after a cursor. `cursor` resumes exactly after the page (nothing skipped,
 * nothing repeated); `hasMore`: more may follow at once; `truncated`: events were left out (only
 * ever those older than the caller's `maxAgeMs`); `settled`: false when events already committed
 * may still be held back by a transaction that is running (a request feed's horizon), so that a
 * reader woken by their doorbell reads again soon.
 */
export interface FeedPage {
  events: FeedEvent[];
  cursor: string;
  hasMore: boolean;
  truncated: boolean;
  settled: boolean;
}

export interface PageOptions {
  /** Where the previous page ended; null: start now (no events, a cursor for later pages). */
  cursor: string | null;
  /** At most this many events (1–MAX_EVENTS). */
  maxEvents: number;
  /** Leave out events older than this many milliseconds (they still move the cursor). */
  maxAgeMs?: number;
}

export interface MessageFeedFilter {
  mailbox_id?: string;
  from?: string;
  subject_contains?: string;
  from_verified?: boolean;
}

export interface DecisionFeedFilter {
  mailbox_id?: string;
  request_ids?: string[];
  states?: RequestState[];
}

export type CreatedFeedFilter = Omit<DecisionFeedFilter, 'states'>;

/**
 * The feeds behind the Events extension (docs/agents.md, "Protocol revisions"): new inbound mail,
 * new approval requests and approval decisions, each after one of Alcarta's cursors, scoped to what
 * the caller's token may see. New mail is a message wait that checks once (the wait engine and the message cursor of
 * `email_await` and `list_messages`); new requests and decisions are request events of the event log
 * in commit-safe order (DecisionCursor). Pages never block: the extension's poll mode is
 * request/response.
 */
@Injectable()
export class EventFeedService {
  constructor(
    private readonly waits: WaitService,
    private readonly events: EventRepository,
  ) {}

  /** Whether the caller may read the feed of new mail (the scope of message waits). */
  readsMail(caller: Caller): boolean {
    return caller.hasScope('mail:read');
  }

  /** Whether the caller may read the feeds of new requests and decisions (the scope of request waits). */
  readsDecisions(caller: Caller): boolean {
    return caller.hasScope('approvals:read');
  }

  /** New inbound mail after the cursor (a message cursor, as `next_cursor` of email_await and list_messages). */
  async messagesReceived(caller: Caller, filter: MessageFeedFilter, page: PageOptions): Promise<FeedPage> {
    const result = await this.waits.await(caller, {
      event: { type: 'message_received', ...filter },
      since_cursor: page.cursor ?? undefined,
      timeout_seconds: 0,
      delivery: 'poll',
      max_events: page.maxEvents,
    });
    const events = (result.events as Array<Record<string, unknown>>).map(({ type: _type, ...data }) => ({
      id: data.message_id as string,
      timestamp: data.received_at as string,
      data,
    }));
    // A full page may have more behind it; the next page says (at worst it is empty).
    return {
      ...recent(events, page.maxAgeMs),
      cursor: result.next_cursor!,
      hasMore: events.length >= page.maxEvents,
      settled: true,
    };
  }

  /** Decided requests (approved, rejected, expired, cancelled) after the cursor. */
  async requestsDecided(caller: Caller, filter: DecisionFeedFilter, page: PageOptions): Promise<FeedPage> {
    return this.requestFeed('request_state_changed', 'approval.decided', caller, filter, page, (r) => ({
      id: r.payload.request_id,
      timestamp: r.payload.changed_at,
      data: {
        request_id: r.payload.request_id,
        mailbox_id: r.mailboxId,
        state: r.payload.state,
        previous_state: r.payload.previous_state,
        changed_at: r.payload.changed_at,
      },
    }));
  }

  /** New requests after the cursor: the `request_created` events, without `type`. */
  async requestsCreated(caller: Caller, filter: CreatedFeedFilter, page: PageOptions): Promise<FeedPage> {
    return this.requestFeed('request_created', 'approval.requested', caller, filter, page, (r) => {
      const { type: _type, ...data } = r.payload;
      return { id: data.request_id, timestamp: data.created_at, data };
    });
  }

  /** One page of a feed of request events of the event log, in commit-safe order (DecisionCursor). */
  private async requestFeed<T extends 'request_state_changed' | 'request_created'>(
    type: T,
    feed: RequestFeed,
    caller: Caller,
    filter: DecisionFeedFilter,
    page: PageOptions,
    toEvent: (row: DecisionRow<T>) => FeedEvent,
  ): Promise<FeedPage> {
    if (filter.mailbox_id !== undefined && !caller.canSeeMailbox(filter.mailbox_id)) {
      throw notFound('mailbox', filter.mailbox_id);
    }
    const query = {
      access: caller.mailboxAccess,
      mailboxId: filter.mailbox_id,
      requestIds: filter.request_ids,
      states: type === 'request_state_changed' ? (filter.states ?? TERMINAL_STATES) : null,
    };
    if (page.cursor === null) {
      const { horizon, settled } = await this.events.requestEventsAfter(
        type,
        DecisionCursor.before(0n, feed),
        query,
        0,
      );
      return {
        events: [],
        cursor: DecisionCursor.before(horizon, feed).toString(),
        hasMore: false,
        truncated: false,
        settled,
      };
    }
    const after = DecisionCursor.parse(page.cursor, feed);
    const { horizon, settled, rows } = await this.events.requestEventsAfter(type, after, query, page.maxEvents + 1);
    const hasMore = rows.length > page.maxEvents;
    const shown = rows.slice(0, page.maxEvents);
    // A page that is not full read everything below the horizon: the next one starts there.
    const next = hasMore ? shown[shown.length - 1].position : after.max(DecisionCursor.before(horizon, feed));
    return { ...recent(shown.map(toEvent), page.maxAgeMs), cursor: next.toString(), hasMore, settled };
  }
}

/** The largest page a feed hands out. */
export const MAX_FEED_PAGE = MAX_EVENTS;

/** The events no older than `maxAgeMs`; `truncated` when some were left out. */
function recent(events: FeedEvent[], maxAgeMs: number | undefined): { events: FeedEvent[]; truncated: boolean } {
  if (maxAgeMs === undefined) return { events, truncated: false };
  const floor = Date.now() - maxAgeMs;
  const kept = events.filter((e) => Date.parse(e.timestamp) >= floor);
  return { events: kept, truncated: kept.length < events.length };
}
