import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

export type EventType = 'message_received' | 'message_sent' | 'request_state_changed';

@Entity({ name: 'events' })
export class EventEntity {
  @PrimaryGeneratedColumn('identity', { type: 'bigint', generatedIdentity: 'ALWAYS' })
  id: string;

  @Column({ type: 'text' })
  type: EventType;

  @Column({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @Column({ name: 'message_id', type: 'text', nullable: true })
  messageId: string | null;

  @Column({ name: 'request_id', type: 'text', nullable: true })
  requestId: string | null;

  /** The event exactly as wait results show it (SPEC §1). */
  @Column({ type: 'jsonb' })
  payload: Record<string, unknown>;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
