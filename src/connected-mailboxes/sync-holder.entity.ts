import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A replica that holds connected folders, under a lease it renews (as `wait_owners` does for
 * persisted waits): a lease that lapsed, or whose doorbell listener session left
 * `pg_stat_activity`, is ended by another replica, which then takes the folders over.
 */
@Entity({ name: 'imap_sync_holders' })
export class SyncHolderEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ name: 'lease_expires_at', type: 'timestamptz' })
  leaseExpiresAt: Date;

  @Column({ name: 'listener_pid', type: 'integer', nullable: true })
  listenerPid: number | null;

  @Column({ name: 'listener_started_at', type: 'timestamptz', nullable: true })
  listenerStartedAt: Date | null;
}
