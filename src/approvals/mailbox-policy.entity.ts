import { Check, Column, Entity, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { MailboxEntity } from '../mail/mailbox.entity';

/** A mailbox's approval policy (docs/policies.md); a mailbox without a row has none. */
@Entity({ name: 'mailbox_policies' })
@Check('mailbox_policies_quorum_check', 'quorum BETWEEN 1 AND 20')
export class MailboxPolicyEntity {
  @PrimaryColumn({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @OneToOne(() => MailboxEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'mailbox_policies_mailbox_id_fkey' })
  mailbox?: MailboxEntity;

  /** Null: every holder of `approvals:decide` on the mailbox may decide. */
  @Column({ type: 'text', array: true, nullable: true })
  approvers: string[] | null;

  @Column({ type: 'integer', default: 1 })
  quorum: number;

  @Column({ name: 'expires_after_seconds', type: 'integer', nullable: true })
  expiresAfterSeconds: number | null;

  @Column({ name: 'escalate_after_seconds', type: 'integer', nullable: true })
  escalateAfterSeconds: number | null;

  @Column({ name: 'escalate_to', type: 'text', array: true, default: '{}' })
  escalateTo: string[];

  @Column({ name: 'recipients_allow', type: 'text', array: true, default: '{}' })
  recipientsAllow: string[];

  @Column({ name: 'recipients_block', type: 'text', array: true, default: '{}' })
  recipientsBlock: string[];

  @Column({ name: 'auto_approve', type: 'boolean', default: false })
  autoApprove: boolean;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;

  /** Binding id of the credential that set it. */
  @Column({ name: 'updated_by', type: 'text' })
  updatedBy: string;
}
