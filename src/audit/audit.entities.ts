import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { AuditActor } from './audit-chain';

const bigintNumber = { to: (value: number) => value, from: (value: string) => Number(value) };

/**
 * The audit trail (docs/audit.md): append-only, one row per security-relevant act, each holding the
 * SHA-256 of the one before. `seq` is assigned under the head's row lock, so it has no gaps.
 */
@Entity({ name: 'audit_log' })
/** For retention: housekeeping prunes the oldest entries first. */
@Index('audit_log_at', ['at'])
export class AuditEntryEntity {
  @PrimaryColumn({ type: 'bigint', transformer: bigintNumber })
  seq: number;

  @Column({ type: 'timestamptz' })
  at: Date;

  @Column({ type: 'text' })
  action: string;

  @Column({ type: 'jsonb' })
  actor: AuditActor;

  @Column({ name: 'client_address', type: 'text', nullable: true })
  clientAddress: string | null;

  @Column({ type: 'jsonb' })
  subject: Record<string, unknown>;

  @Column({ name: 'prev_sha256', type: 'text' })
  prevSha256: string;

  @Column({ type: 'text' })
  sha256: string;
}

/**
 * The chain's head: one row (id 1), the last entry's seq and hash. Appending locks it FOR UPDATE in
 * the act's transaction, which is what serializes appends across replicas; it also lets `audit
 * verify` notice entries deleted from the end.
 */
@Entity({ name: 'audit_head' })
export class AuditHeadEntity {
  @PrimaryColumn({ type: 'smallint' })
  id: number;

  @Column({ type: 'bigint', transformer: bigintNumber })
  seq: number;

  @Column({ type: 'text' })
  sha256: string;
}

/** What pruning left: the last deleted entry's seq and hash, signed (docs/audit.md, "Checkpoints"). */
@Entity({ name: 'audit_checkpoints' })
export class AuditCheckpointEntity {
  @PrimaryColumn({ type: 'bigint', transformer: bigintNumber })
  seq: number;

  @Column({ type: 'text' })
  sha256: string;

  @Column({ name: 'pruned_at', type: 'timestamptz' })
  prunedAt: Date;

  @Column({ name: 'key_id', type: 'text' })
  keyId: string;

  @Column({ type: 'text' })
  signature: string;
}
