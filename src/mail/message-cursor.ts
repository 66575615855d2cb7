import { invalidRequest } from '../kernel/errors';

const PREFIX = 'mc1.';
const MAX_CURSOR_LENGTH = 256 * 1024;
const BODY = /^(?:\d{1,10}:\d{1,15}(?:,\d{1,10}:\d{1,15})*)?$/;

/**
 * A position in the message stream of every mailbox: for each mailbox (by its `cursor_key`), the
 * sequence number of the last message already seen. Mailboxes absent from the cursor are at 0, so a
 * mailbox created (or newly visible) after the cursor was issued is read from its beginning.
 *
 * Because each mailbox's sequence is gap-free and follows commit order (see MessageSequence), "after
 * position n" is exact: nothing below n can still appear, nothing above n has been returned.
 *
 * The encoding is opaque to clients and carries positions only: holding a cursor grants no access.
 * Positions of mailboxes outside a query are carried over untouched into the next cursor.
 */
export class MessageCursor {
  private constructor(private readonly positions: ReadonlyMap<number, number>) {}

  static readonly START = new MessageCursor(new Map());

  static parse(text: string): MessageCursor {
    const fail = () => invalidRequest('invalid_cursor', 'since_cursor is not a cursor issued by this server.');
    if (typeof text !== 'string' || !text.startsWith(PREFIX) || text.length > MAX_CURSOR_LENGTH) throw fail();
    const encoded = text.slice(PREFIX.length);
    if (!/^[A-Za-z0-9_-]*$/.test(encoded)) throw fail();
    const body = Buffer.from(encoded, 'base64url').toString('latin1');
    if (!BODY.test(body) || Buffer.from(body, 'latin1').toString('base64url') !== encoded) throw fail();
    const positions = new Map<number, number>();
    if (body.length > 0) {
      for (const pair of body.split(',')) {
        const [key, seq] = pair.split(':').map(Number);
        if (positions.has(key) || !Number.isSafeInteger(seq)) throw fail();
        positions.set(key, seq);
      }
    }
    return new MessageCursor(positions);
  }

  static fromPositions(entries: Iterable<[number, number]>): MessageCursor {
    return new MessageCursor(new Map(entries));
  }

  position(cursorKey: number): number {
    return this.positions.get(cursorKey) ?? 0;
  }

  /** A cursor moved forward to the given positions; positions never move backwards. */
  advancedTo(entries: Iterable<[number, number]>): MessageCursor {
    const next = new Map(this.positions);
    for (const [key, seq] of entries) if (seq > (next.get(key) ?? 0)) next.set(key, seq);
    return new MessageCursor(next);
  }

  toString(): string {
    const body = [...this.positions.entries()]
      .filter(([, seq]) => seq > 0)
      .sort(([a], [b]) => a - b)
      .map(([key, seq]) => `${key}:${seq}`)
      .join(',');
    return PREFIX + Buffer.from(body, 'latin1').toString('base64url');
  }
}
