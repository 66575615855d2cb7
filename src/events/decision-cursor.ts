import { invalidRequest } from '../kernel/errors';

const PREFIX = 'dc1.';
const BODY = /^(\d{1,19}):(\d{1,19})$/;

/**
 * A position in the feed of approval decisions (`approval.decided` of the Events extension): the
 * event log's rows in (writing transaction, row id) order, up to and including `(xact, id)`. Rows
 * are only ever read below the oldest transaction still running, so nothing can still appear before
 * a position once it is handed out: "after this position" is exact, like a MessageCursor.
 *
 * Opaque to clients, and only positions: holding one grants no access.
 */
export class DecisionCursor {
  private constructor(
    readonly xact: bigint,
    readonly id: bigint,
  ) {}

  /** Everything written by transactions older than `horizon` (the oldest one running at a read). */
  static before(horizon: bigint): DecisionCursor {
    return new DecisionCursor(horizon, 0n);
  }

  static at(xact: bigint, id: bigint): DecisionCursor {
    return new DecisionCursor(xact, id);
  }

  static parse(text: string): DecisionCursor {
    const fail = () =>
      invalidRequest('invalid_cursor', 'cursor is not an approval.decided cursor issued by this server.');
    if (typeof text !== 'string' || !text.startsWith(PREFIX) || text.length > 64) throw fail();
    const encoded = text.slice(PREFIX.length);
    if (!/^[A-Za-z0-9_-]+$/.test(encoded)) throw fail();
    const body = Buffer.from(encoded, 'base64url').toString('latin1');
    const match = BODY.exec(body);
    if (!match || Buffer.from(body, 'latin1').toString('base64url') !== encoded) throw fail();
    const [xact, id] = [BigInt(match[1]), BigInt(match[2])];
    if (xact > MAX_BIGINT || id > MAX_BIGINT) throw fail();
    return new DecisionCursor(xact, id);
  }

  /** The later of the two positions (positions never move backwards). */
  max(other: DecisionCursor): DecisionCursor {
    return this.xact > other.xact || (this.xact === other.xact && this.id >= other.id) ? this : other;
  }

  toString(): string {
    return PREFIX + Buffer.from(`${this.xact}:${this.id}`, 'latin1').toString('base64url');
  }
}

/** PostgreSQL's bigint: larger numbers are no position this server issued. */
const MAX_BIGINT = 2n ** 63n - 1n;
