import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { ApprovalRequestEntity } from '../approvals/approval-request.entity';
import { MailboxEntity } from '../mail/mailbox.entity';
import { MessageEntity } from '../mail/message.entity';

export type EventType = 'message_received' | 'message_sent' | 'request_state_changed' | 'message_delivery_changed';

@Entity({ name: 'events' })
/** Partial indexes (WHERE … IS NOT NULL), owned by the migration. */
@Index('events_request', { synchronize: false })
@Index('events_message', { synchronize: false })
/** For retention: housekeeping deletes the oldest events first. */
@Index('events_created_at', ['createdAt'])
export class EventEntity {
  @PrimaryGeneratedColumn('identity', { type: 'bigint', generatedIdentity: 'ALWAYS' })
  id: string;

  @Column({ type: 'text' })
  type: EventType;

  @Column({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @ManyToOne(() => MailboxEntity)
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'events_mailbox_id_fkey' })
  mailbox?: MailboxEntity;

  @Column({ name: 'message_id', type: 'text', nullable: true })
  messageId: string | null;

  @ManyToOne(() => MessageEntity)
  @JoinColumn({ name: 'message_id', foreignKeyConstraintName: 'events_message_id_fkey' })
  message?: MessageEntity;

  @Column({ name: 'request_id', type: 'text', nullable: true })
  requestId: string | null;

  @ManyToOne(() => ApprovalRequestEntity)
  @JoinColumn({ name: 'request_id', foreignKeyConstraintName: 'events_request_id_fkey' })
  request?: ApprovalRequestEntity;

  /** The event exactly as wait results show it (SPEC §1). */
  @Column({ type: 'jsonb' })
  payload: Record<string, unknown>;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
