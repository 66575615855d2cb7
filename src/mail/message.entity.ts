import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, Unique } from 'typeorm';
import { bigintAsNumber } from '../database/column-transformers';
import { MailboxEntity } from './mailbox.entity';
import { MessageAuthentication } from './message-authentication';

export type Direction = 'inbound' | 'outbound';

@Entity({ name: 'messages' })
@Unique('messages_mailbox_seq_key', ['mailboxId', 'mailboxSeq'])
@Check('messages_direction_check', `direction IN ('inbound', 'outbound')`)
@Index('messages_thread_lookup', ['mailboxId', 'messageIdHeader'])
/** Idempotent ingest: one inbound message per Message-ID per mailbox (partial; owned by the migration). */
@Index('messages_inbound_message_id_key', { synchronize: false })
export class MessageEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @ManyToOne(() => MailboxEntity)
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'messages_mailbox_id_fkey' })
  mailbox?: MailboxEntity;

  /** The message's position in its mailbox: gap-free, in commit order (see MessageSequence). */
  @Column({ name: 'mailbox_seq', type: 'bigint', transformer: bigintAsNumber })
  mailboxSeq: number;

  @Column({ type: 'text' })
  direction: Direction;

  @Column({ name: 'from_address', type: 'text' })
  from: string;

  @Column({ name: 'to_addresses', type: 'text', array: true })
  to: string[];

  @Column({ name: 'cc_addresses', type: 'text', array: true })
  cc: string[];

  @Column({ type: 'text' })
  subject: string;

  @Column({ name: 'text_body', type: 'text' })
  text: string;

  @Column({ name: 'html_body', type: 'text', nullable: true })
  html: string | null;

  @Column({ name: 'message_id_header', type: 'text', nullable: true })
  messageIdHeader: string | null;

  @Column({ name: 'in_reply_to', type: 'text', nullable: true })
  inReplyTo: string | null;

  /** Message-IDs of the References header, oldest first (outbound: the parent's chain and the parent). */
  @Column({ name: 'references_header', type: 'text', array: true, default: () => "'{}'" })
  references: string[];

  /** Sender authentication of inbound mail (docs/mail.md); all `none` for JSON ingest and outbound mail. */
  @Column({ type: 'jsonb' })
  authentication: MessageAuthentication;

  /** True only when DMARC passed for the From domain. */
  @Column({ name: 'from_verified', type: 'boolean', default: false })
  fromVerified: boolean;

  @Column({ name: 'thread_id', type: 'text' })
  threadId: string;

  @Column({ name: 'received_at', type: 'timestamptz' })
  receivedAt: Date;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
