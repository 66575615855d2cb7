import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { invalidRequest, notFound } from '../kernel/errors';
import { newId } from '../common/ids';
import { hasUnstorableText } from '../common/text-safety';
import { MailboxService } from '../mail/mailbox.service';
import { Caller } from '../kernel/caller';
import { assignableMailboxes } from './mailbox-assignment';
import { GrantRepository } from './grant.repository';
import { grantView } from './grant.views';
import { PrincipalClaims } from './principal.repository';
import { PrincipalService } from './principal.service';

export interface NewGrant {
  /** `sub:<subject>`, `client:<client id>` or `group:<group name>`. */
  principal: string;
  /** Mailbox ids, or `['*']` for every mailbox. */
  mailboxes: string[];
}

/** A kind, a colon and a name without control characters or lone surrogates. */
const PRINCIPAL_SHAPE = /^(sub|client|group):[^\p{Cc}\p{Cs}]+$/u;
export const PRINCIPAL_MAX_LENGTH = 500;

/**
 * Grants of mailboxes to OAuth principals (`sub:…`, `client:…`, `group:…`). An OAuth principal
 * reaches the union of the mailboxes granted to its subject, its client and its groups. Grants are
 * administered like tokens (docs/operators.md, "Limits and hardening"): an admin bound to some
 * mailboxes sees, creates and deletes only grants within them. Grants are read from the database on
 * every lookup, never cached, so a deleted grant stops counting at once on every replica.
 */
import { AuditLog } from '../audit/audit-log';

@Injectable()
export class GrantService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly grants: GrantRepository,
    private readonly mailboxes: MailboxService,
    private readonly principals: PrincipalService,
    private readonly audit: AuditLog,
  ) {}

  /** The mailboxes a principal reaches: `['*']` when any of its grants is to every mailbox. */
  mailboxesFor(principal: PrincipalClaims): Promise<string[]> {
    // Claims come from the identity provider: a name PostgreSQL cannot store cannot have a grant.
    const storable = (name: string | null) => (name === null || hasUnstorableText(name) ? null : name);
    return this.grants.mailboxesOf({
      subject: storable(principal.subject) ?? '',
      clientId: storable(principal.clientId),
      groups: principal.groups.filter((g) => storable(g) !== null),
    });
  }

  async create(actor: Caller, input: NewGrant) {
    if (input.principal.length > PRINCIPAL_MAX_LENGTH || !PRINCIPAL_SHAPE.test(input.principal)) {
      throw invalidRequest(
        'invalid_principal',
        'principal is "sub:<subject>", "client:<client id>" or "group:<group name>" with a non-empty name.',
        { field: 'principal' },
      );
    }
    const mailboxes = await assignableMailboxes(actor, input.mailboxes, 'grants', this.mailboxes);
    const grant = await this.dataSource.transaction(async (manager) => {
      const inserted = await this.grants.insert(
        { id: newId('grt'), principal: input.principal, mailboxes, createdBy: actor.tokenId },
        manager,
      );
      await this.audit.append(manager, {
        action: 'grant_created',
        actor,
        subject: { grant_id: inserted.id, principal: inserted.principal, mailboxes },
      });
      return inserted;
    });
    return grantView(grant);
  }

  /** The grants within the actor's reach. */
  async list(actor: Caller) {
    return { grants: (await this.grants.list(actor.mailboxAccess)).map(grantView) };
  }

  /**
   * Deletes a grant within the actor's reach (others answer not_found, like unknown ones). Whoever
   * loses a mailbox by it loses, in the same transaction, everything it holds (docs/operators.md,
   * "Limits and hardening").
   */
  async revoke(actor: Caller, grantId: string): Promise<void> {
    const grant = await this.grants.findById(grantId);
    if (!grant || !actor.reaches(grant.mailboxes)) throw notFound('grant', grantId);
    await this.dataSource.transaction(async (manager) => {
      await this.principals.changeAccess(manager, { grantPrincipal: grant.principal }, async () => {
        await this.grants.delete(manager, grantId);
      });
      // Last, after what changeAccess locks: the audit head is always the last lock a transaction takes.
      await this.audit.append(manager, {
        action: 'grant_revoked',
        actor,
        subject: { grant_id: grantId, principal: grant.principal },
      });
    });
  }
}
