import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * `endpoint`: made over REST (docs/webhooks.md); `events_subscription`: made by an Events-extension
 * client with `events/subscribe` (its id is the subscription's, it expires with its TTL, and its
 * deliveries are the feed's occurrences; see src/event-subscriptions).
 */
export type WebhookEndpointKind = 'endpoint' | 'events_subscription';

/**
 * A webhook endpoint (docs/webhooks.md): where the events of some types in some mailboxes are
 * POSTed, signed with its secret. Both secrets are sealed (src/secrets); the previous one signs too
 * until it expires, 24 h after a rotation.
 */
@Entity({ name: 'webhook_endpoints' })
@Check('webhook_endpoints_kind_check', `kind IN ('endpoint', 'events_subscription')`)
/** Partial index for housekeeping's removal of expired endpoints (owned by the migration). */
@Index('webhook_endpoints_expiring', { synchronize: false })
export class WebhookEndpointEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text', default: 'endpoint' })
  kind: WebhookEndpointKind;

  @Column({ type: 'text' })
  url: string;

  @Column({ type: 'text', array: true })
  events: string[];

  /** Mailbox ids, or `['*']`: every mailbox. */
  @Column({ name: 'mailbox_ids', type: 'text', array: true })
  mailboxIds: string[];

  @Column({ type: 'text', nullable: true })
  description: string | null;

  @Column({ name: 'secret_sealed', type: 'text' })
  secretSealed: string;

  @Column({ name: 'previous_secret_sealed', type: 'text', nullable: true })
  previousSecretSealed: string | null;

  @Column({ name: 'previous_secret_expires_at', type: 'timestamptz', nullable: true })
  previousSecretExpiresAt: Date | null;

  @Column({ type: 'boolean', default: true })
  enabled: boolean;

  @Column({ name: 'disabled_at', type: 'timestamptz', nullable: true })
  disabledAt: Date | null;

  /** `gone` (it answered 410), `failing` (3 days of failures) or `manual` (PATCH enabled=false). */
  @Column({ name: 'disabled_reason', type: 'text', nullable: true })
  disabledReason: string | null;

  /** Since when every attempt failed; null after a success. */
  @Column({ name: 'failing_since', type: 'timestamptz', nullable: true })
  failingSince: Date | null;

  /** When it stops getting deliveries and is removed (an Events-extension subscription's TTL); null: never. */
  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt: Date | null;

  /** The token (or principal) that created it. */
  @Column({ name: 'created_by', type: 'text' })
  createdBy: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}

/** A new endpoint: enabled, never failed, no previous secret; REST endpoints never expire. */
export function newWebhookEndpoint(
  fields: Pick<
    WebhookEndpointEntity,
    'id' | 'url' | 'events' | 'mailboxIds' | 'description' | 'secretSealed' | 'createdBy'
  > &
    Partial<Pick<WebhookEndpointEntity, 'kind' | 'expiresAt'>>,
): WebhookEndpointEntity {
  return Object.assign(new WebhookEndpointEntity(), {
    kind: 'endpoint',
    expiresAt: null,
    previousSecretSealed: null,
    previousSecretExpiresAt: null,
    enabled: true,
    disabledAt: null,
    disabledReason: null,
    failingSince: null,
    ...fields,
  });
}
