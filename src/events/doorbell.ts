/**
 * The PostgreSQL NOTIFY channel on which every committed change rings. A notification only says
 * *where* something changed (a mailbox, a request); waiters re-read the database, which stays the
 * truth. `pg_notify` inside the writing transaction is delivered at commit and dropped on rollback,
 * so a doorbell never announces a change that did not happen.
 */
export const DOORBELL_CHANNEL = 'alcarta_events';

export type Doorbell =
  { kind: 'message'; mailboxId: string } | { kind: 'request'; mailboxId: string; requestId: string };

/** Small payloads keep NOTIFY cheap (the limit is 8000 bytes and the queue is shared). */
export function encodeDoorbell(bell: Doorbell): string {
  return bell.kind === 'message' ? `m ${bell.mailboxId}` : `r ${bell.mailboxId} ${bell.requestId}`;
}

/** Inverse of encodeDoorbell; undefined for payloads that are not ours. */
export function decodeDoorbell(payload: string): Doorbell | undefined {
  const [kind, mailboxId, requestId] = payload.split(' ');
  if (kind === 'm' && mailboxId) return { kind: 'message', mailboxId };
  if (kind === 'r' && mailboxId && requestId) return { kind: 'request', mailboxId, requestId };
  return undefined;
}
