import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { deleteInBatches } from '../database/batched-delete';
import { DecisionCursor } from './decision-cursor';
import { RequestCreatedEventPayload, RequestEventPayload } from './event-log';

/** The request events a feed reads, each kept in commit-safe order by its own partial index. */
interface FeedPayloads {
  request_state_changed: RequestEventPayload;
  request_created: RequestCreatedEventPayload;
}
type FeedType = keyof FeedPayloads;
/**
 * The type as a literal in the query, not a parameter: the planner uses a partial index only when
 * the query's condition names its predicate. A fixed table, so no text of a caller reaches the SQL.
 */
const TYPE_CONDITION: Record<FeedType, string> = {
  request_state_changed: `type = 'request_state_changed'`,
  request_created: `type = 'request_created'`,
};

/** A request event of a feed, at its position. */
export interface DecisionRow<T extends FeedType = 'request_state_changed'> {
  position: DecisionCursor;
  mailboxId: string;
  payload: FeedPayloads[T];
}

/** Which events a read of a feed returns: the caller's mailboxes, narrowed by the filters. */
export interface DecisionFilter {
  /** The mailboxes the caller reaches (`all`: every mailbox). */
  access: { all: true } | { all: false; ids: readonly string[] };
  mailboxId?: string;
  requestIds?: readonly string[];
  /** States a transition ends in (request_state_changed only; null: any). */
  states: readonly string[] | null;
}

/** Reads and deletes of the event log for its retention (appending is EventLog's). */
@Injectable()
export class EventRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * The request events of `type` after `after` that `filter` selects, at most `limit`, in (writing
   * transaction, id) order; and the horizon of this read: the oldest transaction still running when
   * it started. Only rows of older transactions are read. They are all committed (or rolled back)
   * already, so no row can later appear before a position handed out: resuming is exact across
   * concurrent writers, replicas and restarts. A transaction still running holds the feed back
   * until it ends, never longer. `settled`: no committed event of `type` is held back so (else a
   * reader that must not miss it, rather than poll again later, reads again soon).
   */
  async requestEventsAfter<T extends FeedType>(
    type: T,
    after: DecisionCursor,
    filter: DecisionFilter,
    limit: number,
  ): Promise<{ horizon: bigint; settled: boolean; rows: Array<DecisionRow<T>> }> {
    const rows = await this.dataSource.query<
      Array<{
        horizon: string;
        settled: boolean;
        xact: string | null;
        id: string | null;
        mailbox_id: string;
        payload: FeedPayloads[T];
      }>
    >(
      `WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon)
       SELECT h.horizon::text AS horizon, e.xact::text AS xact, e.id::text AS id, e.mailbox_id, e.payload,
              NOT EXISTS (SELECT 1 FROM events WHERE ${TYPE_CONDITION[type]} AND xact >= h.horizon) AS settled
         FROM h
         LEFT JOIN LATERAL (
           SELECT xact, id, mailbox_id, payload FROM events
            WHERE ${TYPE_CONDITION[type]} AND xact IS NOT NULL
              AND (xact, id) > ($1::bigint, $2::bigint) AND xact < h.horizon
              AND ($3::boolean OR mailbox_id = ANY($4::text[]))
              AND ($5::text IS NULL OR mailbox_id = $5)
              AND ($6::text[] IS NULL OR request_id = ANY($6::text[]))
              AND ($7::text[] IS NULL OR payload->>'state' = ANY($7::text[]))
            ORDER BY xact, id
            LIMIT $8) e ON true`,
      [
        after.xact.toString(),
        after.id.toString(),
        filter.access.all,
        filter.access.all ? [] : filter.access.ids,
        filter.mailboxId ?? null,
        filter.requestIds ?? null,
        filter.states,
        limit,
      ],
    );
    return {
      horizon: BigInt(rows[0].horizon),
      settled: rows[0].settled,
      rows: rows
        .filter((r) => r.id !== null)
        .map((r) => ({
          position: DecisionCursor.at(BigInt(r.xact!), BigInt(r.id!), after.feed),
          mailboxId: r.mailbox_id,
          payload: r.payload,
        })),
    };
  }

  /**
   * When the oldest event written at `notBefore` or later was written; undefined when there is none.
   * One probe of the created_at index.
   */
  async oldestCreatedAt(notBefore = new Date(0)): Promise<Date | undefined> {
    const [row] = await this.dataSource.query<Array<{ oldest: Date | null }>>(
      `SELECT min(created_at) AS oldest FROM events WHERE created_at >= $1`,
      [notBefore],
    );
    return row.oldest ?? undefined;
  }

  /**
   * Deletes the events written in [from, to), in batches (safe on every replica at once); answers
   * how many. The lower bound keeps each batch's index scan from walking over the entries that
   * earlier windows left dead until vacuum.
   */
  deleteCreatedBetween(from: Date, to: Date): Promise<number> {
    return deleteInBatches(this.dataSource.manager, 'events', 'created_at >= $1 AND created_at < $2', [from, to]);
  }
}
