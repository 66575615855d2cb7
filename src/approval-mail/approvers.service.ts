import { Injectable } from '@nestjs/common';
import { Caller } from '../kernel/caller';
import { MailboxService } from '../mail/mailbox.service';
import { MailboxApproverRepository } from './mailbox-approver.repository';

/**
 * Who is mailed every new request of a mailbox (docs/approvers.md). An admin sees and sets the approvers of
 * its own mailboxes only; another tenant's mailbox answers as unknown (docs/operators.md, "Limits and hardening").
 */
@Injectable()
export class ApproversService {
  constructor(
    private readonly mailboxes: MailboxService,
    private readonly approvers: MailboxApproverRepository,
  ) {}

  async get(caller: Caller, mailboxId: string) {
    await this.mailboxes.getVisible(caller, mailboxId);
    return { mailbox_id: mailboxId, emails: await this.approvers.list(mailboxId) };
  }

  /** Replaces the list; addresses are compared and kept lower-case, each once. */
  async replace(caller: Caller, mailboxId: string, emails: readonly string[]) {
    await this.mailboxes.getVisible(caller, mailboxId);
    await this.approvers.replace(mailboxId, [...new Set(emails.map((e) => e.toLowerCase()))]);
    return this.get(caller, mailboxId);
  }
}
