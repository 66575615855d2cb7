/**
 * The PostgreSQL NOTIFY channel on which every committed change rings. A notification only says
 * *where* something changed (a mailbox, a request); waiters re-read the database, which stays the
 * truth. `pg_notify` inside the writing transaction is delivered at commit and dropped on rollback,
 * so a doorbell never announces a change that did not happen.
 */
export const DOORBELL_CHANNEL = 'alcarta_events';

export type Doorbell = (
  | { kind: 'message'; mailboxId: string }
  | { kind: 'request'; mailboxId: string; requestId: string }
  /** A persisted wait was created (every replica watches it) or resolved (its result is fixed). */
  | { kind: 'wait_created' | 'wait_resolved'; waitId: string }
) & {
  /** When the change committed (ms since the epoch, database clock), for the wake latency metric. */
  at?: number;
};

/** Small payloads keep NOTIFY cheap (the limit is 8000 bytes and the queue is shared). */
export function encodeDoorbell(bell: Doorbell): string {
  switch (bell.kind) {
    case 'message':
      return `m ${bell.mailboxId}`;
    case 'request':
      return `r ${bell.mailboxId} ${bell.requestId}`;
    case 'wait_created':
      return `n ${bell.waitId}`;
    case 'wait_resolved':
      return `w ${bell.waitId}`;
  }
}

/**
 * Inverse of encodeDoorbell plus the commit time the database appends (see EventLog); undefined
 * for payloads that are not ours.
 */
export function decodeDoorbell(payload: string): Doorbell | undefined {
  const parts = payload.split(' ');
  const at = /^\d+$/.test(parts[parts.length - 1]) ? Number(parts.pop()) : undefined;
  const [kind, id, requestId] = parts;
  if (!id) return undefined;
  if (kind === 'm') return { kind: 'message', mailboxId: id, at };
  if (kind === 'r' && requestId) return { kind: 'request', mailboxId: id, requestId, at };
  if (kind === 'n') return { kind: 'wait_created', waitId: id, at };
  if (kind === 'w') return { kind: 'wait_resolved', waitId: id, at };
  return undefined;
}
