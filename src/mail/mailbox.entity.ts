import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from '../database/column-transformers';

@Entity({ name: 'mailboxes' })
export class MailboxEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  /** Small stable number that stands for the mailbox inside cursors (see MessageCursor). */
  @Column({ name: 'cursor_key', type: 'integer', generated: 'identity', generatedIdentity: 'ALWAYS', unique: true })
  cursorKey: number;

  /** Stored lower-case, unique. */
  @Column({ type: 'text', unique: true })
  address: string;

  @Column({ type: 'text', nullable: true })
  name: string | null;

  /** Position of the newest message in this mailbox (see MessageSequence). */
  @Column({ name: 'message_seq', type: 'bigint', default: 0, transformer: bigintAsNumber })
  messageSeq: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
