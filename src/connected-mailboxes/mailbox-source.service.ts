import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { EventLog } from '../events/event-log';
import { AuditLog } from '../audit/audit-log';
import { Caller } from '../kernel/caller';
import { invalidRequest } from '../kernel/errors';
import { MailHooks, MailboxSourceHandler } from '../mail/mail-hooks';
import { MailboxService } from '../mail/mailbox.service';
import { SecretBox } from '../secrets/secret-box';
import { MailboxSourceRepository } from './mailbox-source.repository';
import { SourceCheck, SourceCheckResult } from './source-check';
import { LoadedSource, SourceCredentials } from './source-credentials';
import { SourceFailure } from './source-failure';
import { connectionChanged, FolderState, prepareSource, SourceSettings } from './source-settings';
import { sourceView } from './source.views';

/** A source checked and sealed, ready to be stored in the mailbox's transaction. */
export interface SealedSource {
  settings: SourceSettings;
  sealedSecrets: string;
  /** The connection settings changed: holders connect anew and the state starts over. */
  reconnect: boolean;
}

/**
 * The connected accounts of mailboxes (docs/connected-mailboxes.md): configuring one (checked by
 * signing in before anything is stored), testing it, showing it, and recording the state its
 * folders' holders report, with a `mailbox_source_changed` event for each change.
 */
@Injectable()
export class MailboxSourceService implements MailboxSourceHandler<SealedSource>, OnModuleInit {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly sources: MailboxSourceRepository,
    private readonly credentials: SourceCredentials,
    private readonly checker: SourceCheck,
    private readonly box: SecretBox,
    private readonly eventLog: EventLog,
    private readonly mailHooks: MailHooks,
    private readonly mailboxes: MailboxService,
    private readonly audit: AuditLog,
  ) {}

  onModuleInit(): void {
    this.mailHooks.provideSources(this);
  }

  async prepare(mailboxId: string | undefined, input: unknown): Promise<SealedSource> {
    if (!this.box.available) {
      throw invalidRequest(
        'secrets_key_missing',
        'This server has no ALCARTA_SECRETS_KEY, which encrypts the credentials of connected accounts; an operator must set one first.',
      );
    }
    const stored = mailboxId === undefined ? undefined : await this.credentials.load(mailboxId);
    const prepared = prepareSource(input, stored?.settings, new Date());
    const secrets = prepared.secrets ?? stored!.secrets;
    const changed = !stored || connectionChanged(stored.settings, prepared.settings, prepared.secrets !== undefined);
    // Pausing or resuming asks for no new check, but for new connections: a resumed source signs in
    // again (and shows auth_failed if its credentials stopped working meanwhile).
    const reconnect = changed || stored.settings.paused !== prepared.settings.paused;
    const candidate: LoadedSource = { mailboxId: undefined, revision: 0, settings: prepared.settings, secrets };
    if (changed && !prepared.settings.paused) await this.checkOrRefuse(candidate);
    return {
      settings: prepared.settings,
      // Sealed after the check: a provider that rotated the refresh token during it gave a new one.
      sealedSecrets: this.credentials.seal(candidate.secrets),
      reconnect,
    };
  }

  async save(manager: EntityManager, mailboxId: string, prepared: SealedSource): Promise<void> {
    const before = await this.sources.find(mailboxId, manager);
    await this.sources.save(manager, mailboxId, prepared.settings, prepared.sealedSecrets, prepared.reconnect);
    const after = (await this.sources.find(mailboxId, manager))!;
    if (before?.state !== after.state) {
      await this.eventLog.appendSourceEvent(manager, {
        type: 'mailbox_source_changed',
        mailbox_id: mailboxId,
        state: after.state,
        previous_state: before?.state ?? null,
        last_error: after.lastError,
        changed_at: new Date().toISOString(),
      });
    }
    await this.eventLog.ringDoorbell(manager, { kind: 'mailbox_source', mailboxId });
  }

  async remove(manager: EntityManager, mailboxId: string): Promise<void> {
    await this.sources.remove(manager, mailboxId);
    await this.eventLog.ringDoorbell(manager, { kind: 'mailbox_source', mailboxId });
  }

  async views(mailboxIds: readonly string[]): Promise<Map<string, object>> {
    const rows = await this.sources.findMany(mailboxIds);
    const now = Date.now();
    return new Map(rows.map((row) => [row.mailboxId, sourceView(row, now)]));
  }

  /** `POST /v1/mailboxes/{id}/source/test`: signs in to the stored account; changes nothing. */
  async test(caller: Caller, mailboxId: string): Promise<({ ok: true } & SourceCheckResult) | TestFailure> {
    await this.mailboxes.getVisible(caller, mailboxId);
    const source = await this.credentials.load(mailboxId);
    if (!source) {
      throw invalidRequest('no_source', `The mailbox ${mailboxId} has no connected account to test.`);
    }
    try {
      return { ok: true, ...(await this.checker.check(source)) };
    } catch (err) {
      if (!(err instanceof SourceFailure)) throw err;
      return { ok: false, stage: err.stage, reason: err.reason, message: err.message };
    }
  }

  /**
   * Records the state a holder sees for one of its folders, and the source's state that follows from
   * all its folders, with an event when that changed. Nothing is written for a folder `holder` no
   * longer holds.
   */
  async recordFolderState(
    holder: string,
    mailboxId: string,
    folder: string,
    state: FolderState,
    error: string | null,
  ): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      const change = await this.sources.recordFolderState(manager, holder, mailboxId, folder, state, error);
      if (!change) return;
      await this.eventLog.appendSourceEvent(manager, {
        type: 'mailbox_source_changed',
        mailbox_id: mailboxId,
        state: change.state,
        previous_state: change.previous,
        last_error: change.lastError,
        changed_at: new Date().toISOString(),
      });
      await this.audit.append(manager, {
        action: 'mailbox_source_changed',
        actor: { system: `imap:${holder}` },
        subject: { mailbox_id: mailboxId, state: change.state, previous_state: change.previous },
      });
    });
  }

  /**
   * Ends a holder's lease (drain): its folders are unheld at once, and the doorbell that rings on
   * the same commit has the other replicas take them now rather than at their next tick.
   */
  async releaseHolder(holder: string): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await this.sources.release(manager, holder);
      await this.eventLog.ringDoorbell(manager, { kind: 'mailbox_source', mailboxId: '*' });
    });
  }

  private async checkOrRefuse(candidate: LoadedSource): Promise<void> {
    try {
      await this.checker.check(candidate);
    } catch (err) {
      if (err instanceof SourceFailure) {
        throw invalidRequest(err.reason, `The account could not be used, so nothing was stored: ${err.message}`, {
          stage: err.stage,
        });
      }
      throw err;
    }
  }
}

export interface TestFailure {
  ok: false;
  stage: SourceFailure['stage'];
  reason: SourceFailure['reason'];
  message: string;
}
