import { hostname } from 'node:os';
import { Injectable, Logger } from '@nestjs/common';
import { randomBase62 } from '../common/ids';
import { AppConfig } from '../config/app-config';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener } from '../events/doorbell-listener';
import { BackgroundJob, Job } from '../lifecycle/background-job';
import { DrainState } from '../lifecycle/drain-state';
import { FolderSync } from './folder-sync';
import { ImapConnector } from './imap-connector';
import { ImapMessageStore } from './imap-message-store';
import { ImapSyncMetrics } from './imap-sync.metrics';
import { HeldFolder, MailboxSourceRepository } from './mailbox-source.repository';
import { MailboxSourceService } from './mailbox-source.service';
import { SourceCredentials } from './source-credentials';

/** Lease ticks per lease: a holder renews three times per lease, so one late tick costs nothing. */
const TICKS_PER_LEASE = 3;

/**
 * This replica's share of the connected folders (docs/connected-mailboxes.md, "Sync"). Each folder
 * is held by one replica at a time, under a lease in `imap_sync_holders`, the design of the
 * persisted waits' ownership: every tick renews this replica's lease, ends the leases of replicas
 * that are gone (their doorbell listener's session left `pg_stat_activity`: a SIGKILL) or hung (the
 * lease lapsed), and takes unheld folders up to a fair share, so a dead holder's folders are
 * synced again within ALCARTA_IMAP_LEASE_SECONDS. A source's change rings a doorbell that makes
 * every holder tick at once; while there is no connected folder at all, nothing else makes it tick,
 * so an installation without connected mailboxes pays nothing for them. On drain the replica closes its connections and gives its lease up,
 * and the others take its folders at their next tick.
 */
@Job('work')
@Injectable()
export class ImapSyncHolder implements BackgroundJob {
  private readonly logger = new Logger('ImapSync');
  readonly holder = `${hostname()
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, 64)}:${process.pid}:${randomBase62(6)}`;
  private readonly syncs = new Map<string, FolderSync>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  /** Whether the last tick found folders to hold anywhere (without any, only a doorbell needs a tick). */
  private anyFolders = true;
  private tickAgain = false;
  private active = false;

  constructor(
    private readonly config: AppConfig,
    private readonly sources: MailboxSourceRepository,
    private readonly service: MailboxSourceService,
    private readonly connector: ImapConnector,
    private readonly credentials: SourceCredentials,
    private readonly store: ImapMessageStore,
    private readonly metrics: ImapSyncMetrics,
    private readonly listener: DoorbellListener,
    drain: DrainState,
  ) {
    drain.onDrain(() => this.stop());
    metrics.watch(() => [...this.syncs.values()]);
  }

  start(): void {
    this.active = true;
    this.listener.subscribe({
      onDoorbell: (bell: Doorbell) => {
        if (bell.kind === 'mailbox_source') this.tick();
      },
      onListenerReconnected: () => this.tick(),
    });
    this.tick();
  }

  /** Closes every connection and gives the lease up, so other replicas take the folders over now. */
  async stop(): Promise<void> {
    if (!this.active) return;
    this.active = false;
    clearTimeout(this.timer);
    await this.ticking;
    await Promise.all([...this.syncs.values()].map((sync) => sync.stop()));
    this.syncs.clear();
    try {
      await this.service.releaseHolder(this.holder);
    } catch (err) {
      // The lease lapses on its own.
      this.logger.warn({ msg: 'could not give up the connected folders at once', error: (err as Error).message });
    }
  }

  /** A lease tick now (single-flight: a tick asked for while one runs follows it). */
  private tick(): void {
    if (!this.active) return;
    if (this.ticking) {
      this.tickAgain = true;
      return;
    }
    clearTimeout(this.timer);
    this.ticking = this.leaseTick().finally(() => {
      this.ticking = undefined;
      if (!this.active) return;
      if (this.tickAgain) {
        this.tickAgain = false;
        this.tick();
      } else if (this.anyFolders || this.syncs.size > 0) {
        this.timer = setTimeout(() => this.tick(), this.config.imapLeaseMs / TICKS_PER_LEASE);
      }
    });
  }

  private async leaseTick(): Promise<void> {
    let held: HeldFolder[];
    try {
      let folders: number;
      ({ held, folders } = await this.sources.leaseTick(
        this.holder,
        this.listener.session,
        this.config.imapLeaseMs,
        this.config.imapMaxFolders,
      ));
      this.anyFolders = folders > 0;
    } catch (err) {
      // The database is away: the syncs go on (their writes fail and are retried); the lease may
      // lapse, and then their writes find the folders no longer theirs.
      this.logger.warn({
        msg: 'the lease of the connected folders could not be renewed',
        error: (err as Error).message,
      });
      return;
    }
    if (!this.active) return;
    const wanted = new Map(held.map((f) => [keyOf(f.mailboxId, f.folder), f]));
    const stopping: Array<Promise<void>> = [];
    for (const [key, sync] of this.syncs) {
      const keep = wanted.get(key);
      if (!keep || keep.revision !== sync.revision || sync.ended) {
        this.syncs.delete(key);
        stopping.push(sync.stop());
      }
    }
    await Promise.all(stopping);
    for (const [key, folder] of wanted) {
      if (this.syncs.has(key)) continue;
      const sync = new FolderSync(folder.mailboxId, folder.folder, folder.revision, {
        holder: this.holder,
        config: this.config,
        connector: this.connector,
        credentials: this.credentials,
        sources: this.sources,
        service: this.service,
        store: this.store,
        metrics: this.metrics,
      });
      this.syncs.set(key, sync);
      sync.start();
    }
  }
}

function keyOf(mailboxId: string, folder: string): string {
  return `${mailboxId}\u0000${folder}`;
}
