import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { BackgroundJob, Job } from '../lifecycle/background-job';
import { DrainState } from '../lifecycle/drain-state';
import { Housekeeping } from '../lifecycle/housekeeping';
import { SecretBox } from '../secrets/secret-box';
import { checkpointSignature } from './audit-chain';

/** The HKDF purpose of the checkpoint key (docs/audit.md, "Checkpoints"). */
export const CHECKPOINT_KEY_PURPOSE = 'alcarta audit checkpoint v1';
const PRUNE_BATCH = 5000;

/**
 * Prunes audit entries older than ALCARTA_AUDIT_RETENTION_DAYS, oldest first, a batch per
 * transaction. Each batch replaces the checkpoint with one naming its last deleted entry (seq and
 * hash), signed with HMAC-SHA256 under a key derived from ALCARTA_SECRETS_KEY: the first entry
 * left links to it, so the trail still verifies, and a checkpoint made up to hide deleted entries
 * does not check without the key. Replicas take turns through a transaction-level advisory lock.
 */
@Job('work')
@Injectable()
export class AuditRetentionHousekeeping implements BackgroundJob {
  private readonly logger = new Logger(AuditRetentionHousekeeping.name);
  private readonly housekeeping: Housekeeping;
  /** Said once per process, not at every run. */
  private warnedKeyMissing = false;

  constructor(
    private readonly config: AppConfig,
    private readonly drain: DrainState,
    private readonly box: SecretBox,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {
    this.housekeeping = new Housekeeping(AuditRetentionHousekeeping.name, config, drain, async () => ({
      audit_entries: await this.prune(),
    }));
  }

  start(): void {
    this.housekeeping.start();
  }

  stop(): Promise<void> {
    return this.housekeeping.stop();
  }

  /** Prunes what is due at `now` (tests pass a later time rather than wait); answers how many entries went. */
  async prune(now = new Date()): Promise<number> {
    const [key] = this.box.derivedKeys(CHECKPOINT_KEY_PURPOSE);
    if (!key) {
      if (this.warnedKeyMissing) return 0;
      this.warnedKeyMissing = true;
      this.logger.warn(
        'audit entries are kept past ALCARTA_AUDIT_RETENTION_DAYS: no ALCARTA_SECRETS_KEY signs a checkpoint',
      );
      return 0;
    }
    const cutoff = new Date(now.getTime() - this.config.auditRetentionMs);
    let pruned = 0;
    while (!this.drain.isDraining) {
      const batch = await this.dataSource.transaction(async (manager) => {
        const [{ locked }] = await manager.query<Array<{ locked: boolean }>>(
          `SELECT pg_try_advisory_xact_lock(hashtext('alcarta_audit_prune')) AS locked`,
        );
        if (!locked) return 0;
        const [last] = await manager.query<Array<{ seq: string; sha256: string; count: number }>>(
          `SELECT seq, sha256, count FROM audit_log,
                  (SELECT max(seq) AS last, count(*)::int AS count
                     FROM (SELECT seq FROM audit_log WHERE at < $1 ORDER BY seq LIMIT $2) due) batch
            WHERE seq = batch.last`,
          [cutoff, PRUNE_BATCH],
        );
        if (!last) return 0;
        const fields = {
          seq: Number(last.seq),
          sha256: last.sha256,
          pruned_at: new Date().toISOString(),
          key_id: key.id,
        };
        await manager.query(`DELETE FROM audit_log WHERE seq <= $1`, [fields.seq]);
        await manager.query(`DELETE FROM audit_checkpoints WHERE seq < $1`, [fields.seq]);
        await manager.query(
          `INSERT INTO audit_checkpoints (seq, sha256, pruned_at, key_id, signature) VALUES ($1, $2, $3, $4, $5)`,
          [fields.seq, fields.sha256, fields.pruned_at, fields.key_id, checkpointSignature(fields, key.bytes)],
        );
        return last.count;
      });
      pruned += batch;
      if (batch < PRUNE_BATCH) break;
    }
    return pruned;
  }
}
