import { Column, CreateDateColumn, Entity, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { MailboxEntity } from '../mail/mailbox.entity';
import type { SourceSettings, SourceState } from './source-settings';

/** A mailbox's connected account (docs/connected-mailboxes.md): its settings, sealed secrets and state. */
@Entity({ name: 'mailbox_sources' })
export class MailboxSourceEntity {
  @PrimaryColumn({ name: 'mailbox_id', type: 'text' })
  mailboxId: string;

  @OneToOne(() => MailboxEntity, { createForeignKeyConstraints: true })
  @JoinColumn({ name: 'mailbox_id', foreignKeyConstraintName: 'mailbox_sources_mailbox_id_fkey' })
  mailbox?: MailboxEntity;

  /** Everything but the secrets, as the mailbox view shows it. */
  @Column({ type: 'jsonb' })
  settings: SourceSettings;

  /** The password, or the OAuth client secret and refresh token: JSON sealed by SecretBox. */
  @Column({ name: 'sealed_secrets', type: 'text' })
  sealedSecrets: string;

  /** Counts changes of the settings: a holder whose connection was made with an older one reconnects. */
  @Column({ type: 'integer', default: 1 })
  revision: number;

  @Column({ type: 'text', default: 'connecting' })
  state: SourceState;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError: string | null;

  /** When every folder was last caught up with the provider. */
  @Column({ name: 'last_sync_at', type: 'timestamptz', nullable: true })
  lastSyncAt: Date | null;

  /** Since when some folder has not been caught up (null while all are): the base of `lag_seconds`. */
  @Column({ name: 'behind_since', type: 'timestamptz', nullable: true })
  behindSince: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
