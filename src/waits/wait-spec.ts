import { Caller } from '../kernel/caller';
import { AccessEndReason } from '../auth/credential-revocation';
import { AlcartaError } from '../kernel/errors';
import { RequestState } from '../approvals/approval-request.entity';
import { RecordedApproval } from '../approvals/approval-policy';
import { MessageCursor } from '../mail/message-cursor';
import { DeliveryView } from '../outbox/delivery.views';
import { DeliveryStatus } from '../outbox/outbound-delivery.entity';
import { StoredWaitSpec } from './persisted-wait.entity';

/** What a message wait watches: which mailboxes, from which position, with which filters. */
export interface MessageWaitSpec {
  kind: 'message';
  caller: Caller;
  /** One mailbox, or undefined for every mailbox the token may read. */
  mailboxId: string | undefined;
  /** Where to start; undefined means "after the newest message at the start of the wait". */
  since: MessageCursor | undefined;
  /** Lower-cased sender address to match exactly, if any. */
  from: string | undefined;
  /** Lower-cased substring the subject must contain, if any. */
  subjectContains: string | undefined;
  /** Only messages whose From domain passed DMARC (`from_verified: true`); false: no such filter. */
  fromVerifiedOnly: boolean;
  timeoutMs: number;
  /** At most this many events in the result (an `events/poll` page); undefined: MAX_EVENTS. */
  maxEvents?: number;
}

/**
 * What a request wait watches: the listed requests, until one is in one of `states` or its
 * outbound delivery (docs/mail.md) has one of `deliveryStates` (empty: delivery is not awaited).
 */
export interface RequestWaitSpec {
  kind: 'request';
  caller: Caller;
  requestIds: string[];
  states: ReadonlySet<RequestState>;
  deliveryStates: ReadonlySet<DeliveryStatus>;
  timeoutMs: number;
}

export type WaitSpec = MessageWaitSpec | RequestWaitSpec;

/** The poll result of a wait (docs/agents.md, "Waits"; the same object websocket delivery and tasks will carry). */
export interface WaitResult {
  matched: boolean;
  timed_out: boolean;
  shutdown: boolean;
  events: object[];
  next_cursor?: string;
  requests?: WatchedRequest[];
}

/**
 * One listed request in a request-wait result: its state, under a quorum above one the approvals so
 * far (as `get_request` shows them), and, once approved mail has one, its delivery.
 */
export interface WatchedRequest {
  request_id: string;
  state: RequestState;
  approvals?: RecordedApproval[];
  delivery?: DeliveryView;
}

/**
 * What a persisted wait stores when its token lost its access before the outcome: nobody gets a
 * result; whoever still waits for it (an open socket) gets the `unauthorized` error instead.
 */
export interface AccessEnded {
  error: 'unauthorized';
  reason: AccessEndReason;
}

export function isAccessEnded(result: WaitResult | AccessEnded): result is AccessEnded {
  return 'error' in result;
}

const ACCESS_ENDED_MESSAGES: Record<AccessEndReason, string> = {
  token_expired: 'The token expired while waiting; the wait ended. Wait again with a valid token.',
  token_revoked: 'The token was revoked while waiting; the wait ended.',
  access_removed: 'Access to a mailbox was removed while waiting (a grant was deleted); the wait ended.',
};

/**
 * The tool error (and websocket error frame) of a wait whose token lost its access
 * (docs/operators.md, "Limits and hardening").
 */
export function accessEndedError(reason: AccessEndReason): AlcartaError {
  return new AlcartaError('unauthorized', reason, ACCESS_ENDED_MESSAGES[reason]);
}

/** How a wait is delivered: a blocking call, an open websocket, or watched in the background. */
export type WaitDelivery = 'poll' | 'websocket' | 'persisted' | 'stream';

/** The stored form of a spec; a message wait stores the cursor it starts from. */
export function toStoredSpec(spec: WaitSpec, start: MessageCursor | undefined): StoredWaitSpec {
  return spec.kind === 'message'
    ? {
        kind: 'message',
        mailbox_id: spec.mailboxId ?? null,
        from: spec.from ?? null,
        subject_contains: spec.subjectContains ?? null,
        from_verified: spec.fromVerifiedOnly,
        cursor: start!.toString(),
      }
    : {
        kind: 'request',
        request_ids: spec.requestIds,
        states: [...spec.states],
        ...(spec.deliveryStates.size > 0 && { delivery_states: [...spec.deliveryStates] }),
      };
}

export function fromStoredSpec(stored: StoredWaitSpec, caller: Caller, timeoutMs: number): WaitSpec {
  return stored.kind === 'message'
    ? {
        kind: 'message',
        caller,
        mailboxId: stored.mailbox_id ?? undefined,
        since: MessageCursor.parse(stored.cursor),
        from: stored.from ?? undefined,
        subjectContains: stored.subject_contains ?? undefined,
        // Waits stored before the filter existed have no such field: no filter.
        fromVerifiedOnly: stored.from_verified === true,
        timeoutMs,
      }
    : {
        kind: 'request',
        caller,
        requestIds: stored.request_ids,
        states: new Set(stored.states),
        deliveryStates: new Set(stored.delivery_states),
        timeoutMs,
      };
}
