import { CreateDateColumn, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { MailboxEntity } from '../mail/mailbox.entity';

/** Someone who is mailed every new request of a mailbox, with links to decide it (docs/approvers.md). */
@Entity({ name: 'mailbox_approvers' })
export class MailboxApproverEntity {
  @PrimaryColumn({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @ManyToOne(() => MailboxEntity)
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'mailbox_approvers_mailbox_id_fkey' })
  mailbox?: MailboxEntity;

  @PrimaryColumn({ type: 'text' })
  email: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
