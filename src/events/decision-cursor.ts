import { invalidRequest } from '../kernel/errors';

/**
 * The feeds of request events, each with its own cursor prefix so that a cursor of one is refused
 * by the other (both are positions in the same order of the event log).
 */
export type RequestFeed = 'approval.decided' | 'approval.requested';
const PREFIXES: Record<RequestFeed, string> = { 'approval.decided': 'dc1.', 'approval.requested': 'rc1.' };
const BODY = /^(\d{1,19}):(\d{1,19})$/;

/**
 * A position in a feed of request events of the Events extension (`approval.decided`, by default,
 * or `approval.requested`): the event log's rows in (writing transaction, row id) order, up to and
 * including `(xact, id)`. Rows are only ever read below the oldest transaction still running, so
 * nothing can still appear before a position once it is handed out: "after this position" is exact,
 * like a MessageCursor.
 *
 * Opaque to clients, and only positions: holding one grants no access.
 */
export class DecisionCursor {
  private constructor(
    readonly xact: bigint,
    readonly id: bigint,
    readonly feed: RequestFeed,
  ) {}

  /** Everything written by transactions older than `horizon` (the oldest one running at a read). */
  static before(horizon: bigint, feed: RequestFeed = 'approval.decided'): DecisionCursor {
    return new DecisionCursor(horizon, 0n, feed);
  }

  static at(xact: bigint, id: bigint, feed: RequestFeed = 'approval.decided'): DecisionCursor {
    return new DecisionCursor(xact, id, feed);
  }

  static parse(text: string, feed: RequestFeed = 'approval.decided'): DecisionCursor {
    const fail = () => invalidRequest('invalid_cursor', `cursor is not an ${feed} cursor issued by this server.`);
    const prefix = PREFIXES[feed];
    if (typeof text !== 'string' || !text.startsWith(prefix) || text.length > 64) throw fail();
    const encoded = text.slice(prefix.length);
    if (!/^[A-Za-z0-9_-]+$/.test(encoded)) throw fail();
    const body = Buffer.from(encoded, 'base64url').toString('latin1');
    const match = BODY.exec(body);
    if (!match || Buffer.from(body, 'latin1').toString('base64url') !== encoded) throw fail();
    const [xact, id] = [BigInt(match[1]), BigInt(match[2])];
    if (xact > MAX_BIGINT || id > MAX_BIGINT) throw fail();
    return new DecisionCursor(xact, id, feed);
  }

  /** The later of the two positions (positions never move backwards). */
  max(other: DecisionCursor): DecisionCursor {
    return this.xact > other.xact || (this.xact === other.xact && this.id >= other.id) ? this : other;
  }

  toString(): string {
    return PREFIXES[this.feed] + Buffer.from(`${this.xact}:${this.id}`, 'latin1').toString('base64url');
  }
}

/** PostgreSQL's bigint: larger numbers are no position this server issued. */
const MAX_BIGINT = 2n ** 63n - 1n;
