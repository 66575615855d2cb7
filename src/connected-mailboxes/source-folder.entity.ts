import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from '../database/column-transformers';
import { MailboxSourceEntity } from './mailbox-source.entity';
import type { FolderState } from './source-settings';
import { SyncHolderEntity } from './sync-holder.entity';

/**
 * One connected folder: where its sync stands (IMAP UIDs under one UIDVALIDITY) and which replica
 * holds it. `last_uid` is the highest UID stored; an initial sync walks `initial_next_uid` up to
 * `initial_until_uid` while live mail above it is taken first.
 */
@Entity({ name: 'mailbox_source_folders' })
export class SourceFolderEntity {
  @PrimaryColumn({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @PrimaryColumn({ type: 'text' })
  folder: string;

  @ManyToOne(() => MailboxSourceEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'mailbox_source_folders_mailbox_id_fkey' })
  source?: MailboxSourceEntity;

  @Column({ name: 'uid_validity', type: 'bigint', nullable: true, transformer: bigintAsNumber })
  uidValidity: number | null;

  @Column({ name: 'last_uid', type: 'bigint', default: 0, transformer: bigintAsNumber })
  lastUid: number;

  @Column({ name: 'initial_next_uid', type: 'bigint', nullable: true, transformer: bigintAsNumber })
  initialNextUid: number | null;

  @Column({ name: 'initial_until_uid', type: 'bigint', nullable: true, transformer: bigintAsNumber })
  initialUntilUid: number | null;

  @Index('mailbox_source_folders_holder')
  @Column({ type: 'text', nullable: true })
  holder: string | null;

  @ManyToOne(() => SyncHolderEntity, { onDelete: 'SET NULL' })
  @JoinColumn({ name: 'holder', foreignKeyConstraintName: 'mailbox_source_folders_holder_fkey' })
  holderRow?: SyncHolderEntity;

  @Column({ type: 'text', default: 'connecting' })
  state: FolderState;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError: string | null;

  @Column({ name: 'last_sync_at', type: 'timestamptz', nullable: true })
  lastSyncAt: Date | null;
}
