import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';

export type EventType =
  | 'message_received'
  | 'message_sent'
  | 'request_created'
  | 'request_state_changed'
  | 'request_escalated'
  | 'message_delivery_changed'
  | 'mailbox_source_changed'
  | 'webhook_disabled';

/**
 * The event log. Its foreign keys name the tables they point at (mailboxes, messages,
 * approval_requests) rather than their entity classes, so the events module depends on no feature
 * module; the relations only declare the constraints and are never loaded.
 */
@Entity({ name: 'events' })
/** Partial indexes (WHERE … IS NOT NULL), owned by the migration. */
@Index('events_request', { synchronize: false })
@Index('events_message', { synchronize: false })
/** For retention: housekeeping deletes the oldest events first. */
@Index('events_created_at', ['createdAt'])
/** The decision feed of the Events extension, in commit-safe order (partial; owned by the migration). */
@Index('events_decisions', { synchronize: false })
/** The feed of new requests (`approval.requested`), likewise. */
@Index('events_requests_created', { synchronize: false })
export class EventEntity {
  @PrimaryGeneratedColumn('identity', { type: 'bigint', generatedIdentity: 'ALWAYS' })
  id: string;

  @Column({ type: 'text' })
  type: EventType;

  /** Null only for events about no one mailbox (`webhook_disabled` of an endpoint of every mailbox). */
  @Column({ name: 'mailbox_id', type: 'text', nullable: true })
  mailboxId: string | null;

  @ManyToOne('mailboxes')
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'events_mailbox_id_fkey' })
  mailbox?: unknown;

  @Column({ name: 'message_id', type: 'text', nullable: true })
  messageId: string | null;

  @ManyToOne('messages')
  @JoinColumn({ name: 'message_id', foreignKeyConstraintName: 'events_message_id_fkey' })
  message?: unknown;

  @Column({ name: 'request_id', type: 'text', nullable: true })
  requestId: string | null;

  @ManyToOne('approval_requests')
  @JoinColumn({ name: 'request_id', foreignKeyConstraintName: 'events_request_id_fkey' })
  request?: unknown;

  /** The event exactly as wait results show it (docs/agents.md, "Concepts"). */
  @Column({ type: 'jsonb' })
  payload: Record<string, unknown>;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  /**
   * The id of the transaction that wrote the row (xid8 as a bigint), set by the database: the order
   * in which the request feeds read (EventRepository.requestEventsAfter). NULL for rows written before.
   */
  @Column({
    type: 'bigint',
    nullable: true,
    default: () => 'alcarta_current_xact()',
    insert: false,
    update: false,
    select: false,
  })
  xact?: string | null;
}
