import { Check, Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { WebhookEndpointEntity } from './webhook-endpoint.entity';

/**
 * `event`: an event of the event log for a REST endpoint (the body is the event plus `cursor`, the
 * webhook-id the delivery's id); `occurrence`: an event of an Events-extension subscription's feed
 * (an EventOccurrence, whose `cursor` is worked out when it is sent); `control`: a control envelope
 * of the extension (`terminated`).
 */
export type WebhookDeliveryKind = 'event' | 'occurrence' | 'control';

export type WebhookDeliveryStatus = 'queued' | 'sending' | 'retrying' | 'delivered' | 'failed';

export const WEBHOOK_DELIVERY_STATUSES: readonly WebhookDeliveryStatus[] = [
  'queued',
  'sending',
  'retrying',
  'delivered',
  'failed',
];

/**
 * One event for one endpoint (docs/webhooks.md): written in the transaction that writes the event,
 * claimed by one replica at a time (`claimed_by` until `lease_expires_at`), retried with backoff
 * until delivered or failed. Its id is the `webhook-id` of every attempt.
 */
@Entity({ name: 'webhook_deliveries' })
@Check('webhook_deliveries_kind_check', `kind IN ('event', 'occurrence', 'control')`)
@Check('webhook_deliveries_status_check', `status IN ('queued', 'sending', 'retrying', 'delivered', 'failed')`)
@Index('webhook_deliveries_endpoint', ['endpointId', 'createdAt'])
/** For retention: housekeeping deletes finished deliveries as old as the events they carried. */
@Index('webhook_deliveries_created_at', ['createdAt'])
/** Partial indexes for the worker's claim (owned by the migration). */
@Index('webhook_deliveries_due', { synchronize: false })
@Index('webhook_deliveries_leases', { synchronize: false })
@Index('webhook_deliveries_pending_pages', { synchronize: false })
export class WebhookDeliveryEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ name: 'endpoint_id', type: 'text' })
  endpointId: string;

  @ManyToOne(() => WebhookEndpointEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'endpoint_id', foreignKeyConstraintName: 'webhook_deliveries_endpoint_id_fkey' })
  endpoint?: WebhookEndpointEntity;

  @Column({ type: 'text', default: 'event' })
  kind: WebhookDeliveryKind;

  /** The event's id in the event log: its cursor (`event` deliveries only). */
  @Column({ name: 'event_id', type: 'bigint', nullable: true })
  eventId: string | null;

  /** The `webhook-id` of its POSTs when it is not the delivery's id (the occurrence's eventId). */
  @Column({ name: 'message_id', type: 'text', nullable: true })
  messageId: string | null;

  /** Occurrences: the page of the subscription's feed they were read in, and the feed's cursor before and after it. */
  @Column({ type: 'bigint', nullable: true })
  page: string | null;

  @Column({ name: 'cursor_before', type: 'text', nullable: true })
  cursorBefore: string | null;

  @Column({ name: 'cursor_after', type: 'text', nullable: true })
  cursorAfter: string | null;

  @Column({ name: 'event_type', type: 'text' })
  eventType: string;

  @Column({ name: 'mailbox_id', type: 'text', nullable: true })
  mailboxId: string | null;

  /** The body POSTed: the event as waits see it, plus `cursor`. */
  @Column({ type: 'jsonb' })
  payload: Record<string, unknown>;

  @Column({ type: 'text', default: 'queued' })
  status: WebhookDeliveryStatus;

  @Column({ type: 'integer', default: 0 })
  attempts: number;

  @Column({ name: 'next_attempt_at', type: 'timestamptz', nullable: true })
  nextAttemptAt: Date | null;

  @Column({ name: 'claimed_by', type: 'text', nullable: true })
  claimedBy: string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt: Date | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'delivered_at', type: 'timestamptz', nullable: true })
  deliveredAt: Date | null;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError: string | null;
}

/** One POST of a delivery: the endpoint's status code, or why there was none. */
@Entity({ name: 'webhook_attempts' })
export class WebhookAttemptEntity {
  @PrimaryColumn({ name: 'delivery_id', type: 'text' })
  deliveryId: string;

  @ManyToOne(() => WebhookDeliveryEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'delivery_id', foreignKeyConstraintName: 'webhook_attempts_delivery_id_fkey' })
  delivery?: WebhookDeliveryEntity;

  @PrimaryColumn({ type: 'integer' })
  n: number;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  at: Date;

  @Column({ name: 'status_code', type: 'integer', nullable: true })
  statusCode: number | null;

  @Column({ type: 'text', nullable: true })
  error: string | null;

  @Column({ name: 'duration_ms', type: 'integer' })
  durationMs: number;
}
