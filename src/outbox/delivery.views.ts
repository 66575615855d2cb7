import { DeliveryFailure, DeliveryStatus, OutboundDeliveryEntity } from './outbound-delivery.entity';

/** The `delivery` object (docs/mail.md), on requests and outbound messages; absent fields are left out. */
export interface DeliveryView {
  status: DeliveryStatus;
  attempts: number;
  last_attempt_at?: string;
  next_attempt_at?: string;
  response?: string;
  error?: string;
  /** On a `failed` delivery: why, as a code. */
  reason?: DeliveryFailure;
}

/** The columns the view shows (the wait engine reads them with its own SQL). */
export type DeliveryFields = Pick<
  OutboundDeliveryEntity,
  'status' | 'attempts' | 'lastAttemptAt' | 'nextAttemptAt' | 'response' | 'error' | 'reason'
>;

export function deliveryView(d: DeliveryFields): DeliveryView {
  return {
    status: d.status,
    attempts: d.attempts,
    ...(d.lastAttemptAt !== null && { last_attempt_at: d.lastAttemptAt.toISOString() }),
    ...(d.nextAttemptAt !== null && { next_attempt_at: d.nextAttemptAt.toISOString() }),
    ...(d.response !== null && { response: d.response }),
    ...(d.error !== null && { error: d.error }),
    ...(d.reason !== null && { reason: d.reason }),
  };
}

/** One entry of `GET /v1/outbox`: what an administrator needs to recognise the message, and its delivery. */
export interface OutboxEntryView extends DeliveryView {
  message_id: string;
  mailbox_id: string;
  request_id: string | null;
  from: string | null;
  to: string[];
  cc: string[];
  subject: string | null;
  queued_at: string;
  updated_at: string;
}

export function outboxEntryView(d: OutboundDeliveryEntity): OutboxEntryView {
  return {
    message_id: d.messageId,
    mailbox_id: d.mailboxId,
    request_id: d.requestId,
    from: d.message?.from ?? null,
    to: d.message?.to ?? [],
    cc: d.message?.cc ?? [],
    subject: d.message?.subject ?? null,
    queued_at: d.queuedAt.toISOString(),
    updated_at: d.updatedAt.toISOString(),
    ...deliveryView(d),
  };
}
