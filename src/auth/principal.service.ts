import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { EventLog } from '../events/event-log';
import { losesMailbox } from '../kernel/caller';
import { CredentialRevocationHooks } from './credential-revocation';
import { PrincipalClaimsRecord, PrincipalRepository, PrincipalSelector } from './principal.repository';

/** How many principals one process remembers as recorded, to skip rewriting unchanged claims. */
const REMEMBERED_PRINCIPALS = 10_000;

/**
 * OAuth principals as credentials that outlive their access tokens (docs/operators.md, "Identity providers"), and the
 * end of their access when a change takes a mailbox away from them (a deleted grant, or newer claims
 * that no longer match a grant; docs/operators.md, "Limits and hardening").
 */
@Injectable()
export class PrincipalService {
  /** Binding id → the claims last recorded from this process (insertion order = age). */
  private readonly recorded = new Map<string, string>();

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly principals: PrincipalRepository,
    private readonly revocationHooks: CredentialRevocationHooks,
    private readonly eventLog: EventLog,
  ) {}

  /**
   * Records the principal's claims, so that any replica can act for what it stores. A write only
   * when this process has not seen the database hold these same claims yet: a steady agent costs
   * nothing. Claims the database kept out (a newer token's differ) are not remembered, so the next
   * token with them is written, not skipped.
   */
  async record(claims: PrincipalClaimsRecord): Promise<void> {
    const fingerprint = JSON.stringify([claims.clientId, claims.groups, claims.scopes, claims.email]);
    if (this.recorded.get(claims.id) === fingerprint) return;
    let current = false;
    await this.dataSource.transaction((manager) =>
      this.changeAccess(manager, { ids: [claims.id] }, async () => {
        current = await this.principals.upsert(manager, claims);
      }),
    );
    this.recorded.delete(claims.id);
    if (!current) return;
    this.recorded.set(claims.id, fingerprint);
    if (this.recorded.size > REMEMBERED_PRINCIPALS) this.recorded.delete(this.recorded.keys().next().value!);
  }

  /**
   * Runs `change` (inside `manager`'s transaction) and ends, atomically with it, everything held by
   * the selected principals that it takes a mailbox from: their stored waits and tasks now, and
   * through the doorbell their parked calls, sockets and tickets on every replica.
   */
  async changeAccess(manager: EntityManager, selector: PrincipalSelector, change: () => Promise<void>): Promise<void> {
    const before = await this.principals.reach(manager, selector);
    await change();
    if (before.size === 0) return;
    const after = await this.principals.reach(manager, { ids: [...before.keys()] });
    for (const [id, mailboxes] of before) {
      if (!losesMailbox(mailboxes, after.get(id) ?? [])) continue;
      await this.revocationHooks.revoke(manager, id, 'access_removed');
      await this.eventLog.ringDoorbell(manager, { kind: 'credential_revoked', tokenId: id, reason: 'access_removed' });
    }
  }
}
