import { Check, Column, CreateDateColumn, Entity, Index, PrimaryColumn } from 'typeorm';

@Entity({ name: 'grants' })
@Check('grants_principal_check', `principal ~ '^(sub|client|group):.'`)
@Check('grants_mailboxes_check', `cardinality(mailboxes) > 0`)
@Index('grants_principal', ['principal'])
export class GrantEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  /** `sub:<subject>`, `client:<client id>` or `group:<group name>`. */
  @Column({ type: 'text' })
  principal: string;

  /** Mailbox ids the principal reaches, or `['*']` for all of them. */
  @Column({ type: 'text', array: true })
  mailboxes: string[];

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  /** The id of the credential that created the grant (`operator` for the CLI). */
  @Column({ name: 'created_by', type: 'text' })
  createdBy: string;
}
