import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AuditLog } from '../audit/audit-log';
import { Caller } from '../kernel/caller';
import { MailboxService } from '../mail/mailbox.service';
import { NO_POLICY, policyView, preparePolicy } from './approval-policy';
import { DEFAULT_EXPIRY_SECONDS, MAX_EXPIRY_SECONDS } from './approval.service';
import { SetPolicyDto } from './dto/set-policy.dto';
import { MailboxPolicyRepository } from './mailbox-policy.repository';

/**
 * Approval policies per mailbox (docs/policies.md). Administered like the mailbox itself: an admin
 * sees and sets the policies of its own mailboxes, another tenant's answers as unknown. A change
 * applies to decisions from then on; a pending request keeps the quorum and escalation time it
 * was made under.
 */
@Injectable()
export class MailboxPolicyService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly policies: MailboxPolicyRepository,
    private readonly mailboxes: MailboxService,
    private readonly audit: AuditLog,
  ) {}

  async get(caller: Caller, mailboxId: string) {
    await this.mailboxes.getVisible(caller, mailboxId);
    const stored = await this.policies.find(mailboxId);
    return policyView(mailboxId, stored?.policy ?? NO_POLICY, stored?.updatedAt ?? null);
  }

  /** Replaces the whole policy: a field left out takes its default. */
  async put(caller: Caller, mailboxId: string, body: SetPolicyDto) {
    await this.mailboxes.getVisible(caller, mailboxId);
    const policy = preparePolicy({
      ...body,
      defaultExpirySeconds: DEFAULT_EXPIRY_SECONDS,
      maxExpirySeconds: MAX_EXPIRY_SECONDS,
    });
    const updatedAt = await this.dataSource.transaction(async (manager) => {
      const at = await this.policies.put(manager, mailboxId, policy, caller.tokenId);
      await this.audit.append(manager, {
        action: 'policy_changed',
        actor: caller,
        subject: { mailbox_id: mailboxId, policy: policyView(mailboxId, policy, null) },
      });
      return at;
    });
    return policyView(mailboxId, policy, updatedAt);
  }
}
