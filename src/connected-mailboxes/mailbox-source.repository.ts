import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In } from 'typeorm';
import { MailboxSourceEntity } from './mailbox-source.entity';
import { SourceFolderEntity } from './source-folder.entity';
import type { FolderState, SourceSettings, SourceState } from './source-settings';

/** A connected folder this replica holds, and the revision of its source's settings. */
export interface HeldFolder {
  mailboxId: string;
  folder: string;
  revision: number;
}

/** What one lease tick came to. */
export interface HoldingTick {
  /** The folders this replica holds after the tick. */
  held: HeldFolder[];
  /** Folders of sources that are not paused, on every replica. */
  folders: number;
  /** Whether other replicas hold live leases. */
  peers: boolean;
}

/** A folder's position after a batch of messages was stored (written in the batch's transaction). */
export interface FolderPosition {
  uidValidity: number;
  lastUid: number;
  initialNextUid: number | null;
  initialUntilUid: number | null;
  /** The folder is caught up with the provider (its `last_sync_at` moves). */
  caughtUp: boolean;
}

/** The state of one folder and the source it belongs to, for an event when the source's state changes. */
export interface SourceStateChange {
  mailboxId: string;
  previous: SourceState;
  state: SourceState;
  lastError: string | null;
}

@Injectable()
export class MailboxSourceRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  find(mailboxId: string, manager: EntityManager = this.dataSource.manager): Promise<MailboxSourceEntity | null> {
    return manager.findOneBy(MailboxSourceEntity, { mailboxId });
  }

  findMany(mailboxIds: readonly string[]): Promise<MailboxSourceEntity[]> {
    if (mailboxIds.length === 0) return Promise.resolve([]);
    return this.dataSource.manager.findBy(MailboxSourceEntity, { mailboxId: In([...mailboxIds]) });
  }

  /** Whether the mailbox has a connected account that sends through its own submission server. */
  async sendsOnItsOwn(mailboxId: string, manager: EntityManager = this.dataSource.manager): Promise<boolean> {
    const rows = await manager.query<unknown[]>(
      `SELECT 1 FROM mailbox_sources WHERE mailbox_id = $1 AND settings->'smtp' <> 'null'::jsonb`,
      [mailboxId],
    );
    return rows.length > 0;
  }

  /**
   * Stores a new source, or new settings for one; `reconnect` counts a new revision (its holders
   * connect again) and starts its state anew. The folders' positions stay (a folder no longer
   * listed is dropped at the next lease tick).
   */
  async save(
    manager: EntityManager,
    mailboxId: string,
    settings: SourceSettings,
    sealedSecrets: string,
    reconnect: boolean,
  ): Promise<void> {
    const state: SourceState = settings.paused ? 'paused' : 'connecting';
    await manager.query(
      `INSERT INTO mailbox_sources (mailbox_id, settings, sealed_secrets, state, behind_since)
       VALUES ($1, $2, $3, $4, now())
       ON CONFLICT (mailbox_id) DO UPDATE
         SET settings = EXCLUDED.settings, sealed_secrets = EXCLUDED.sealed_secrets, updated_at = now(),
             revision = mailbox_sources.revision + CASE WHEN $5 THEN 1 ELSE 0 END,
             state = CASE WHEN $5 OR EXCLUDED.state = 'paused' OR mailbox_sources.state = 'paused'
                          THEN EXCLUDED.state ELSE mailbox_sources.state END,
             last_error = CASE WHEN $5 THEN NULL ELSE mailbox_sources.last_error END`,
      [mailboxId, JSON.stringify(settings), sealedSecrets, state, reconnect],
    );
    // A source that starts over (new settings, paused or resumed) forgets what its folders last saw.
    await manager.query(
      `UPDATE mailbox_source_folders SET state = 'connecting', last_error = NULL
        WHERE mailbox_id = $1 AND (SELECT state FROM mailbox_sources WHERE mailbox_id = $1) IN ('connecting', 'paused')`,
      [mailboxId],
    );
  }

  /** Re-seals the secrets (a rotated refresh token, or a key rotation) without changing anything else. */
  async replaceSecrets(mailboxId: string, revision: number, sealedSecrets: string): Promise<void> {
    await this.dataSource.manager.update(MailboxSourceEntity, { mailboxId, revision }, { sealedSecrets });
  }

  async remove(manager: EntityManager, mailboxId: string): Promise<void> {
    await manager.delete(MailboxSourceEntity, { mailboxId });
  }

  folder(mailboxId: string, folder: string): Promise<SourceFolderEntity | null> {
    return this.dataSource.manager.findOneBy(SourceFolderEntity, { mailboxId, folder });
  }

  /**
   * Records a folder's position inside the transaction that stored its messages, if `holder` still
   * holds the folder; otherwise throws LostFolder, and the transaction (the messages) rolls back:
   * a replica that lost its lease never stores what its successor stores.
   */
  async savePosition(
    manager: EntityManager,
    holder: string,
    mailboxId: string,
    folder: string,
    position: FolderPosition,
  ): Promise<void> {
    const [, count] = await manager.query<[unknown[], number]>(
      `UPDATE mailbox_source_folders
          SET uid_validity = $4, last_uid = $5, initial_next_uid = $6, initial_until_uid = $7,
              last_sync_at = CASE WHEN $8 THEN now() ELSE last_sync_at END
        WHERE mailbox_id = $1 AND folder = $2 AND holder = $3`,
      [
        mailboxId,
        folder,
        holder,
        position.uidValidity,
        position.lastUid,
        position.initialNextUid,
        position.initialUntilUid,
        position.caughtUp,
      ],
    );
    if (count === 0) throw new LostFolder(mailboxId, folder);
    if (position.caughtUp) {
      await manager.query(`UPDATE mailbox_sources SET last_sync_at = now() WHERE mailbox_id = $1 AND state = 'idle'`, [
        mailboxId,
      ]);
    }
  }

  /**
   * Records a folder's state (if `holder` still holds it) and works out its source's: the worst of
   * its folders' states, with the newest error. Returns the source's change, if its state or error
   * changed (then the caller appends the event, in the same transaction).
   */
  async recordFolderState(
    manager: EntityManager,
    holder: string,
    mailboxId: string,
    folder: string,
    state: FolderState,
    error: string | null,
  ): Promise<SourceStateChange | undefined> {
    const [source] = await manager.query<Array<{ state: SourceState; last_error: string | null }>>(
      `SELECT state, last_error FROM mailbox_sources WHERE mailbox_id = $1 FOR UPDATE`,
      [mailboxId],
    );
    if (!source) return undefined;
    const [, count] = await manager.query<[unknown[], number]>(
      `UPDATE mailbox_source_folders
          SET state = $4, last_error = $5, last_sync_at = CASE WHEN $4 = 'idle' THEN now() ELSE last_sync_at END
        WHERE mailbox_id = $1 AND folder = $2 AND holder = $3`,
      [mailboxId, folder, holder, state, error],
    );
    if (count === 0 || source.state === 'paused') return undefined;
    const folders = await manager.query<Array<{ state: FolderState; last_error: string | null }>>(
      `SELECT state, last_error FROM mailbox_source_folders WHERE mailbox_id = $1 ORDER BY folder`,
      [mailboxId],
    );
    const worst = worstOf(folders.map((f) => f.state));
    const lastError = error ?? folders.find((f) => f.last_error !== null)?.last_error ?? null;
    if (worst === source.state && lastError === source.last_error) return undefined;
    await manager.query(
      `UPDATE mailbox_sources
          SET state = $2, last_error = $3,
              last_sync_at = CASE WHEN $2 = 'idle' THEN now() ELSE last_sync_at END,
              behind_since = CASE WHEN $2 = 'idle' THEN NULL ELSE coalesce(behind_since, now()) END
        WHERE mailbox_id = $1`,
      [mailboxId, worst, lastError],
    );
    return { mailboxId, previous: source.state, state: worst, lastError };
  }

  /**
   * One lease tick of `holder`, in one transaction: renews its lease until `leaseMs` from now (with
   * its doorbell listener's session, so that others see at once when this process is gone); ends the
   * leases that lapsed or whose listener session left `pg_stat_activity` (their folders become
   * unheld through the foreign key); lists every folder of every source that is not paused (and
   * forgets folders no longer listed); gives up folders above this replica's fair share (the folders
   * divided by the live replicas, at most `maxFolders`) and claims unheld ones up to it.
   */
  async leaseTick(
    holder: string,
    listener: { pid: number; startedAt: string } | undefined,
    leaseMs: number,
    maxFolders: number,
  ): Promise<HoldingTick> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query(
        `INSERT INTO imap_sync_holders (id, lease_expires_at, listener_pid, listener_started_at)
         VALUES ($1, now() + $2 * interval '1 millisecond', $3, $4::timestamptz)
         ON CONFLICT (id) DO UPDATE
           SET lease_expires_at = EXCLUDED.lease_expires_at, listener_pid = EXCLUDED.listener_pid,
               listener_started_at = EXCLUDED.listener_started_at`,
        [holder, leaseMs, listener?.pid ?? null, listener?.startedAt ?? null],
      );
      await manager.query(
        `DELETE FROM imap_sync_holders h
          WHERE h.id <> $1
            AND (h.lease_expires_at < now()
                 OR (h.listener_pid IS NOT NULL AND NOT EXISTS (
                       SELECT 1 FROM pg_stat_activity a
                        WHERE a.pid = h.listener_pid AND a.backend_start = h.listener_started_at)))`,
        [holder],
      );
      await manager.query(
        `INSERT INTO mailbox_source_folders (mailbox_id, folder)
         SELECT s.mailbox_id, f.name
           FROM mailbox_sources s, jsonb_array_elements_text(s.settings->'folders') AS f(name)
         ON CONFLICT DO NOTHING`,
      );
      await manager.query(
        `DELETE FROM mailbox_source_folders d
          USING mailbox_sources s
          WHERE s.mailbox_id = d.mailbox_id AND NOT (s.settings->'folders' ? d.folder)`,
      );
      await manager.query(
        `UPDATE mailbox_source_folders d SET holder = NULL
           FROM mailbox_sources s
          WHERE s.mailbox_id = d.mailbox_id AND d.holder IS NOT NULL AND s.state = 'paused'`,
      );
      const [{ holders, folders, held }] = await manager.query<
        Array<{ holders: number; folders: number; held: number }>
      >(
        `SELECT (SELECT count(*)::int FROM imap_sync_holders) AS holders,
                (SELECT count(*)::int FROM mailbox_source_folders d JOIN mailbox_sources s USING (mailbox_id)
                  WHERE s.state <> 'paused') AS folders,
                (SELECT count(*)::int FROM mailbox_source_folders WHERE holder = $1) AS held`,
        [holder],
      );
      const share = Math.min(maxFolders, Math.ceil(folders / Math.max(1, holders)));
      if (held > share) {
        await manager.query(
          `UPDATE mailbox_source_folders SET holder = NULL
            WHERE (mailbox_id, folder) IN (
              SELECT mailbox_id, folder FROM mailbox_source_folders WHERE holder = $1
               ORDER BY mailbox_id DESC, folder DESC LIMIT $2)`,
          [holder, held - share],
        );
      } else if (held < share) {
        await manager.query(
          `UPDATE mailbox_source_folders d SET holder = $1
            WHERE (d.mailbox_id, d.folder) IN (
              SELECT f.mailbox_id, f.folder FROM mailbox_source_folders f JOIN mailbox_sources s USING (mailbox_id)
               WHERE f.holder IS NULL AND s.state <> 'paused'
               ORDER BY f.mailbox_id, f.folder LIMIT $2
               FOR UPDATE OF f SKIP LOCKED)`,
          [holder, share - held],
        );
      }
      const rows = await manager.query<Array<{ mailbox_id: string; folder: string; revision: number }>>(
        `SELECT d.mailbox_id, d.folder, s.revision
           FROM mailbox_source_folders d JOIN mailbox_sources s USING (mailbox_id)
          WHERE d.holder = $1`,
        [holder],
      );
      return {
        held: rows.map((r) => ({ mailboxId: r.mailbox_id, folder: r.folder, revision: r.revision })),
        folders,
        peers: holders > 1,
      };
    });
  }

  /** Ends `holder`'s lease: its folders become unheld (the foreign key sets their holder to NULL). */
  async release(manager: EntityManager, holder: string): Promise<void> {
    await manager.query(`DELETE FROM imap_sync_holders WHERE id = $1`, [holder]);
  }
}

/** The folder is no longer held by this replica (its lease ended, or its source changed or was removed). */
export class LostFolder extends Error {
  constructor(mailboxId: string, folder: string) {
    super(`the folder ${folder} of ${mailboxId} is no longer held here`);
    this.name = 'LostFolder';
  }
}

const SEVERITY: readonly FolderState[] = ['auth_failed', 'unreachable', 'connecting', 'syncing', 'idle'];

function worstOf(states: readonly FolderState[]): FolderState {
  return SEVERITY.find((s) => states.includes(s)) ?? 'connecting';
}
