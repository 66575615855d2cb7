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
  /**
   * A persisted wait was created, by `owner` when that replica watches it (nobody else need act),
   * else unowned (any replica may claim it).
   */
  | { kind: 'wait_created'; waitId: string; owner?: string }
  /** A persisted wait was resolved (its result is fixed). */
  | { kind: 'wait_resolved'; waitId: string }
  /**
   * Several persisted waits were resolved in one transaction. One bell names as many as fit in a
   * payload (see resolvedWaitBells); the wire form is that of `wait_resolved` with more ids.
   */
  | { kind: 'waits_resolved'; waitIds: string[] }
  /** A replica gave up its persisted waits (it is draining): another replica claims them now. */
  | { kind: 'waits_released'; owner: string }
  /**
   * A credential lost its access (revoked, expired, or a principal's mailbox removed): everything it
   * holds open must end, everywhere.
   */
  | { kind: 'credential_revoked'; tokenId: string; reason?: 'access_removed' }
  /**
   * A client cancelled an in-flight request (`notifications/cancelled`), which may be parked on
   * any replica. `requestKey` identifies the JSON-RPC request id without spaces (see requestKey()).
   */
  | { kind: 'call_cancelled'; tokenId: string; requestKey: string }
  /** Outbound mail of this mailbox was queued or re-queued: every replica's outbox worker looks for work. */
  | { kind: 'outbox'; mailboxId: string }
  /**
   * A person signed out of the console: every replica ends the live streams of that session.
   * `sessionId` is the session's stored hash (never its secret, which only the cookie holds).
   */
  | { kind: 'session_ended'; sessionId: string }
  /**
   * A mailbox's connected account was configured, changed, paused or removed, or a replica gave up
   * the folders it held (`mailboxId` is then `*`): the replicas that hold connected folders look again.
   */
  | { kind: 'mailbox_source'; mailboxId: string }
  /** Webhook deliveries were queued or re-queued: every replica's webhook worker looks for work. */
  | { kind: 'webhooks' }
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
      return bell.owner ? `n ${bell.waitId} ${bell.owner}` : `n ${bell.waitId}`;
    case 'wait_resolved':
      return `w ${bell.waitId}`;
    case 'waits_resolved':
      return `w ${bell.waitIds.join(' ')}`;
    case 'waits_released':
      return `u ${bell.owner}`;
    case 'credential_revoked':
      return bell.reason ? `t ${bell.tokenId} ${bell.reason}` : `t ${bell.tokenId}`;
    case 'call_cancelled':
      return `c ${bell.tokenId} ${bell.requestKey}`;
    case 'outbox':
      return `o ${bell.mailboxId}`;
    case 'session_ended':
      return `s ${bell.sessionId}`;
    case 'mailbox_source':
      return `i ${bell.mailboxId}`;
    case 'webhooks':
      return 'h *';
  }
}

/**
 * Inverse of encodeDoorbell plus the commit time the database appends (see EventLog); undefined
 * for payloads that are not ours.
 */
export function decodeDoorbell(payload: string): Doorbell | undefined {
  const parts = payload.split(' ');
  const at = /^\d+$/.test(parts[parts.length - 1]) ? Number(parts.pop()) : undefined;
  const [kind, id, second] = parts;
  if (!id) return undefined;
  if (kind === 'm') return { kind: 'message', mailboxId: id, at };
  if (kind === 'r' && second) return { kind: 'request', mailboxId: id, requestId: second, at };
  if (kind === 't') {
    return second === 'access_removed'
      ? { kind: 'credential_revoked', tokenId: id, reason: second, at }
      : { kind: 'credential_revoked', tokenId: id, at };
  }
  if (kind === 'c' && second) return { kind: 'call_cancelled', tokenId: id, requestKey: second, at };
  if (kind === 'n')
    return second ? { kind: 'wait_created', waitId: id, owner: second, at } : { kind: 'wait_created', waitId: id, at };
  if (kind === 'w') {
    return parts.length > 2
      ? { kind: 'waits_resolved', waitIds: parts.slice(1), at }
      : { kind: 'wait_resolved', waitId: id, at };
  }
  if (kind === 'u') return { kind: 'waits_released', owner: id, at };
  if (kind === 'o') return { kind: 'outbox', mailboxId: id, at };
  if (kind === 's') return { kind: 'session_ended', sessionId: id, at };
  if (kind === 'i') return { kind: 'mailbox_source', mailboxId: id, at };
  if (kind === 'h') return { kind: 'webhooks', at };
  return undefined;
}

/**
 * The payload budget of one bell naming resolved waits: NOTIFY refuses 8000 bytes or more, and the
 * database appends the commit time (a space and 13 digits).
 */
export const RESOLVED_BELL_MAX_BYTES = 7900;

/**
 * The bells that announce `waitIds` resolved: as few as possible, each within
 * RESOLVED_BELL_MAX_BYTES (ids are ASCII). One id rings as `wait_resolved`, as it always has.
 */
export function resolvedWaitBells(waitIds: readonly string[]): Doorbell[] {
  const bells: Doorbell[] = [];
  let chunk: string[] = [];
  let bytes = 1; // the kind letter
  for (const id of waitIds) {
    if (chunk.length > 0 && bytes + 1 + id.length > RESOLVED_BELL_MAX_BYTES) {
      bells.push(resolvedBell(chunk));
      chunk = [];
      bytes = 1;
    }
    chunk.push(id);
    bytes += 1 + id.length;
  }
  if (chunk.length > 0) bells.push(resolvedBell(chunk));
  return bells;
}

function resolvedBell(waitIds: string[]): Doorbell {
  return waitIds.length === 1 ? { kind: 'wait_resolved', waitId: waitIds[0] } : { kind: 'waits_resolved', waitIds };
}

/**
 * A JSON-RPC request id (string or number) as one doorbell word: the type is kept (`1` and `"1"`
 * are different ids) and the text is base64url, so no space can split the payload. Undefined for
 * ids too long to ring about (a client that uses them cannot cancel across replicas).
 */
export function requestKey(id: string | number): string | undefined {
  const key = (typeof id === 'number' ? 'n' : 's') + Buffer.from(String(id), 'utf8').toString('base64url');
  return key.length <= 200 ? key : undefined;
}
