import { Logger } from '@nestjs/common';
import type { FetchMessageObject, ImapFlow } from 'imapflow';
import { AppConfig } from '../config/app-config';
import { FetchedMessage, ImapMessageStore } from './imap-message-store';
import { ImapConnector } from './imap-connector';
import { FolderPosition, LostFolder } from './mailbox-source.repository';
import { MailboxSourceService } from './mailbox-source.service';
import { MailboxSourceRepository } from './mailbox-source.repository';
import { LoadedSource, SourceCredentials } from './source-credentials';
import { SourceFailure } from './source-failure';
import type { FolderState } from './source-settings';
import { ImapSyncMetrics } from './imap-sync.metrics';

/** Messages, and bytes, fetched and stored per transaction of new mail. */
const BATCH_MESSAGES = 50;
const BATCH_BYTES = 8 * 1024 * 1024;
/**
 * The same for older mail (the initial sync): smaller, because new mail that arrives meanwhile
 * waits for the batch in progress (the connection is busy with it) before it goes first.
 */
const INITIAL_BATCH_MESSAGES = 20;
const INITIAL_BATCH_BYTES = 2 * 1024 * 1024;
/** UIDs of the initial sync whose sizes and dates are read per round. */
const INITIAL_ROUND_UIDS = 500;
/** The first pause before a reconnect; it doubles up to ALCARTA_IMAP_RETRY_MAX_SECONDS. */
const FIRST_RETRY_MS = 1000;

/** What a FolderSync borrows from the replica that holds the folder. */
export interface FolderSyncDeps {
  holder: string;
  config: AppConfig;
  connector: ImapConnector;
  credentials: SourceCredentials;
  sources: MailboxSourceRepository;
  service: MailboxSourceService;
  store: ImapMessageStore;
  metrics: ImapSyncMetrics;
}

interface Candidate {
  uid: number;
  size: number;
  internalDate: Date | undefined;
}

/**
 * One connected folder held by this replica (docs/connected-mailboxes.md, "Sync"): a connection in
 * IMAP IDLE that wakes on new mail (EXISTS) and stores it at once; after every (re)connect it
 * catches up by UID from the stored position, and a changed UIDVALIDITY starts the folder over
 * (what comes back is found by Message-ID, so nothing is stored twice). An initial sync walks the
 * older mail in small batches between live ones, so it never delays new mail, and holds at most one
 * batch in memory. Connection trouble is recorded as the folder's state (`unreachable`,
 * `auth_failed`) and retried with exponential back-off; waits are never failed by it.
 */
export class FolderSync {
  private readonly logger = new Logger('ImapSync');
  state: FolderState = 'connecting';
  /** Seconds behind the provider: since when the folder has not been caught up (undefined while it is). */
  behindSince: number | undefined = Date.now();
  private stopped = false;
  private client: ImapFlow | undefined;
  private livePending = true;
  private wake: (() => void) | undefined;
  private running: Promise<void> | undefined;

  constructor(
    readonly mailboxId: string,
    readonly folder: string,
    readonly revision: number,
    private readonly deps: FolderSyncDeps,
  ) {}

  /** The sync gave the folder up by itself (it found it no longer held, or its source changed). */
  ended = false;

  start(): void {
    this.running = this.run().finally(() => (this.ended = true));
  }

  /** Ends the connection; resolves once nothing more is written for the folder. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    this.client?.close();
    await this.running;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        await this.session();
        failures = 0;
      } catch (err) {
        this.client?.close();
        this.client = undefined;
        if (this.stopped || err instanceof LostFolder) break;
        const failure = err instanceof SourceFailure ? err : connectionLost(err);
        failures++;
        if (failure.reason === 'source_auth_failed') this.deps.metrics.authFailures.inc();
        await this.record(failure.folderState, failure.message).catch((e: unknown) => this.recordFailed(e));
        this.logger.warn({
          msg: 'connected folder unavailable',
          mailbox_id: this.mailboxId,
          folder: this.folder,
          state: failure.folderState,
          error: failure.message,
        });
        await this.pause(backoff(failures, this.deps.config.imapRetryMaxMs));
      }
    }
    this.client?.close();
  }

  /** One connection, from sign-in until it fails or the folder is given up. */
  private async session(): Promise<void> {
    const source = await this.deps.credentials.load(this.mailboxId);
    // A changed or removed source: the holder starts a FolderSync of the new revision, or none.
    if (!source || source.revision !== this.revision) throw new LostFolder(this.mailboxId, this.folder);
    const client = await this.deps.connector.open(source, { idle: true });
    this.client = client;
    this.livePending = true;
    client.on('exists', () => {
      this.livePending = true;
      this.wake?.();
    });
    client.on('close', () => this.wake?.());
    if (this.stopped) return;
    const mailbox = await client.mailboxOpen(this.folder, { readOnly: true }).catch((err: Error) => {
      if (!client.usable) throw err;
      throw new SourceFailure(
        'folder',
        'source_folder_missing',
        `The folder "${this.folder}" cannot be opened: ${err.message}.`,
      );
    });
    let position = await this.startingPosition(Number(mailbox.uidValidity), mailbox.uidNext, source);
    if (position.initialNextUid !== null || mailbox.uidNext - 1 > position.lastUid) await this.record('syncing', null);

    while (!this.stopped) {
      if (!client.usable)
        throw new SourceFailure('connect', 'source_unreachable', 'The connection to the account was closed.');
      if (this.livePending) {
        this.livePending = false;
        position = await this.catchUp(client, source, position);
        continue;
      }
      if (position.initialNextUid !== null) {
        position = await this.initialRound(client, source, position);
        continue;
      }
      if (this.state !== 'idle') await this.record('idle', null);
      this.behindSince = undefined;
      await this.idle(client);
    }
    await client.logout().catch(() => client.close());
  }

  /** IDLE until new mail, the end of the connection, or stop (imapflow renews IDLE every ALCARTA_IMAP_IDLE_SECONDS). */
  private async idle(client: ImapFlow): Promise<void> {
    if (this.livePending || this.stopped) return;
    await new Promise<void>((resolve) => {
      this.wake = resolve;
      client.idle().then(
        () => resolve(),
        () => resolve(),
      );
    });
    this.wake = undefined;
  }

  /**
   * Where the folder's sync starts on this connection. The first connection, and one that finds a
   * new UIDVALIDITY, take everything below UIDNEXT as the initial sync (from `sync_from`) and every
   * later UID as live mail.
   */
  private async startingPosition(uidValidity: number, uidNext: number, source: LoadedSource): Promise<FolderPosition> {
    const row = await this.deps.sources.folder(this.mailboxId, this.folder);
    if (!row) throw new LostFolder(this.mailboxId, this.folder);
    if (row.uidValidity === uidValidity) {
      return {
        uidValidity,
        lastUid: row.lastUid,
        initialNextUid: row.initialNextUid,
        initialUntilUid: row.initialUntilUid,
        caughtUp: false,
      };
    }
    if (row.uidValidity !== null) {
      this.logger.warn({
        msg: 'UIDVALIDITY of a connected folder changed: syncing it again (known messages are skipped by Message-ID)',
        mailbox_id: this.mailboxId,
        folder: this.folder,
      });
    }
    const until = uidNext - 1;
    const position: FolderPosition = {
      uidValidity,
      lastUid: until,
      initialNextUid: until > 0 ? 1 : null,
      initialUntilUid: until > 0 ? until : null,
      caughtUp: false,
    };
    await this.deps.store.store(this.deps.holder, this.mailboxId, this.folder, source.settings, [], position);
    return position;
  }

  /** Stores every message above the live position (new mail), in batches. */
  private async catchUp(client: ImapFlow, source: LoadedSource, position: FolderPosition): Promise<FolderPosition> {
    const candidates = (await this.candidates(client, `${position.lastUid + 1}:*`)).filter(
      (c) => c.uid > position.lastUid,
    );
    let at = position;
    const batches = this.batches(candidates);
    if (batches.length === 0) {
      if (this.state === 'idle') return at;
      at = { ...at, caughtUp: at.initialNextUid === null };
      await this.deps.store.store(this.deps.holder, this.mailboxId, this.folder, source.settings, [], at);
      return at;
    }
    for (const [i, batch] of batches.entries()) {
      const last = i === batches.length - 1;
      at = { ...at, lastUid: batch[batch.length - 1].uid, caughtUp: last && at.initialNextUid === null };
      await this.storeBatch(client, source, batch, at, 'live');
    }
    return at;
  }

  /**
   * One round of the initial sync: the next INITIAL_ROUND_UIDS UIDs, stored batch by batch from
   * `sync_from` on; it returns early when new mail is waiting, which goes first.
   */
  private async initialRound(
    client: ImapFlow,
    source: LoadedSource,
    position: FolderPosition,
  ): Promise<FolderPosition> {
    const from = position.initialNextUid!;
    const until = position.initialUntilUid!;
    const roundEnd = Math.min(until, from + INITIAL_ROUND_UIDS - 1);
    const since = source.settings.sync_since ? Date.parse(source.settings.sync_since) : undefined;
    const candidates = (await this.candidates(client, `${from}:${roundEnd}`)).filter(
      (c) => c.uid >= from && c.uid <= roundEnd && (since === undefined || (c.internalDate?.getTime() ?? 0) >= since),
    );
    let at = position;
    for (const batch of this.batches(candidates, INITIAL_BATCH_MESSAGES, INITIAL_BATCH_BYTES)) {
      const next = batch[batch.length - 1].uid + 1;
      at = { ...at, initialNextUid: next, caughtUp: false };
      await this.storeBatch(client, source, batch, at, 'initial');
      if (this.livePending || this.stopped) return at;
    }
    const done = roundEnd >= until;
    at = {
      ...at,
      initialNextUid: done ? null : roundEnd + 1,
      initialUntilUid: done ? null : until,
      caughtUp: done,
    };
    await this.deps.store.store(this.deps.holder, this.mailboxId, this.folder, source.settings, [], at);
    return at;
  }

  private async candidates(client: ImapFlow, range: string): Promise<Candidate[]> {
    const found: Candidate[] = [];
    for await (const m of client.fetch(range, { uid: true, size: true, internalDate: true }, { uid: true })) {
      found.push({ uid: m.uid, size: m.size ?? 0, internalDate: dateOf(m.internalDate) });
    }
    return found.sort((a, b) => a.uid - b.uid);
  }

  /** Messages grouped so that a batch holds at most `maxMessages` and about `maxBytes`. */
  private batches(
    candidates: readonly Candidate[],
    maxMessages = BATCH_MESSAGES,
    maxBytes = BATCH_BYTES,
  ): Candidate[][] {
    const batches: Candidate[][] = [];
    let current: Candidate[] = [];
    let bytes = 0;
    for (const c of candidates) {
      if (current.length > 0 && (current.length >= maxMessages || bytes + c.size > maxBytes)) {
        batches.push(current);
        current = [];
        bytes = 0;
      }
      current.push(c);
      bytes += c.size;
    }
    if (current.length > 0) batches.push(current);
    return batches;
  }

  private async storeBatch(
    client: ImapFlow,
    source: LoadedSource,
    batch: readonly Candidate[],
    position: FolderPosition,
    phase: 'live' | 'initial',
  ): Promise<void> {
    const maxBytes = this.deps.config.maxIngestBytes;
    const wanted = batch.filter((c) => c.size <= maxBytes);
    if (wanted.length < batch.length) {
      this.logger.warn({
        msg: 'messages of a connected folder are larger than ALCARTA_MAX_INGEST_BYTES and were left in the account',
        mailbox_id: this.mailboxId,
        folder: this.folder,
        uids: batch.filter((c) => c.size > maxBytes).map((c) => c.uid),
      });
    }
    const fetched: FetchedMessage[] = [];
    if (wanted.length > 0) {
      const byUid = new Map(wanted.map((c) => [c.uid, c]));
      for await (const m of client.fetch(
        wanted.map((c) => c.uid).join(','),
        { uid: true, source: true },
        { uid: true },
      )) {
        if (m.source && byUid.has(m.uid))
          fetched.push({ uid: m.uid, source: m.source, internalDate: byUid.get(m.uid)!.internalDate });
      }
    }
    fetched.sort((a, b) => a.uid - b.uid);
    const stored = await this.deps.store.store(
      this.deps.holder,
      this.mailboxId,
      this.folder,
      source.settings,
      fetched,
      position,
    );
    this.deps.metrics.synced.inc({ phase }, stored);
  }

  private async record(state: FolderState, error: string | null): Promise<void> {
    if (this.stopped) return;
    if (state !== 'idle' && this.behindSince === undefined) this.behindSince = Date.now();
    this.state = state;
    await this.deps.service.recordFolderState(this.deps.holder, this.mailboxId, this.folder, state, error);
  }

  private recordFailed(err: unknown): void {
    this.logger.warn({
      msg: 'the state of a connected folder could not be recorded',
      mailbox_id: this.mailboxId,
      error: (err as Error)?.message,
    });
  }

  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => (this.wake = undefined));
  }
}

function dateOf(value: FetchMessageObject['internalDate']): Date | undefined {
  if (value instanceof Date) return value;
  if (typeof value === 'string') {
    const parsed = new Date(value);
    return Number.isNaN(parsed.getTime()) ? undefined : parsed;
  }
  return undefined;
}

function connectionLost(err: unknown): SourceFailure {
  const message = (err as Error)?.message ?? String(err);
  return new SourceFailure('connect', 'source_unreachable', `The connection to the account failed: ${message}.`);
}

/** Exponential back-off with jitter, so that a provider back from an outage is not hit by every folder at once. */
function backoff(failures: number, maxMs: number): number {
  const base = Math.min(maxMs, FIRST_RETRY_MS * 2 ** Math.min(failures - 1, 20));
  return Math.round(base / 2 + Math.random() * (base / 2));
}
