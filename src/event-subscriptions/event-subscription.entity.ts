import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { WebhookEndpointEntity } from '../webhooks/webhook-endpoint.entity';

/**
 * A webhook subscription of the Events extension (docs/agents.md, "Webhook delivery"): who asked
 * (`owner`, a token or principal id), for which event type and arguments, and how far its feed has
 * been read. Where and how it is delivered (URL, secrets, expiry, failures) is its webhook endpoint
 * of kind `events_subscription`, which has the same id; deleting that removes this too.
 */
@Entity({ name: 'event_subscriptions' })
@Index('event_subscriptions_owner_url', ['owner', 'url'])
export class EventSubscriptionEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @ManyToOne(() => WebhookEndpointEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'id', foreignKeyConstraintName: 'event_subscriptions_id_fkey' })
  endpoint?: WebhookEndpointEntity;

  @Column({ type: 'text' })
  owner: string;

  @Column({ type: 'text' })
  url: string;

  /** The event type (`email.received`, …). */
  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'jsonb' })
  arguments: Record<string, unknown>;

  /** Where the next feed page starts: everything before it has been queued for delivery. */
  @Column({ name: 'feed_cursor', type: 'text' })
  feedCursor: string;

  /** Feed pages that had occurrences, so far: the number of the next one is this plus one. */
  @Column({ type: 'bigint', default: 0 })
  pages: string;

  /** While a replay catches up: occurrences older than this are left out (the client's `maxAgeMs`). */
  @Column({ name: 'replay_floor', type: 'timestamptz', nullable: true })
  replayFloor: Date | null;

  /** When it ended without its client (its credential lost access): a `terminated` envelope was queued. */
  @Column({ name: 'ended_at', type: 'timestamptz', nullable: true })
  endedAt: Date | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'refreshed_at', type: 'timestamptz', default: () => 'now()' })
  refreshedAt: Date;
}
