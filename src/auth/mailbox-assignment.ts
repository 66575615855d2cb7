import { AlcartaError, invalidRequest } from '../kernel/errors';
import { MailboxService } from '../mail/mailbox.service';
import { Caller } from '../kernel/caller';

/** What an admin hands mailboxes to, for the messages of a refusal. */
export type MailboxAssignee = 'tokens' | 'grants';

/**
 * The mailboxes an admin may hand to a new token or grant (docs/operators.md, "Limits and
 * hardening"), de-duplicated: `["*"]` or a non-empty list of existing ids, all within the admin's
 * own mailboxes. Reach is checked before existence, so a mailbox-bound admin cannot probe for other
 * tenants' mailboxes.
 */
export async function assignableMailboxes(
  actor: Caller,
  requested: readonly string[],
  assignee: MailboxAssignee,
  mailboxService: MailboxService,
): Promise<string[]> {
  const mailboxes = [...new Set(requested)];
  if (mailboxes.length === 0 || (mailboxes.includes('*') && mailboxes.length > 1)) {
    throw invalidRequest('invalid_mailboxes', 'mailboxes is either ["*"] or a non-empty list of mailbox ids.', {
      field: 'mailboxes',
    });
  }
  if (!actor.reaches(mailboxes)) throw outOfReach(actor, mailboxes, assignee);
  const unknownMailboxes = mailboxes.includes('*') ? [] : await mailboxService.unknownIds(mailboxes);
  if (unknownMailboxes.length > 0) {
    throw invalidRequest('unknown_mailbox', `No such mailboxes: ${unknownMailboxes.join(', ')}.`, {
      field: 'mailboxes',
      mailbox_ids: unknownMailboxes,
    });
  }
  return mailboxes;
}

function outOfReach(actor: Caller, mailboxes: readonly string[], assignee: MailboxAssignee): AlcartaError {
  const verb = assignee === 'tokens' ? 'create tokens for' : 'grant';
  if (mailboxes.includes('*')) {
    return new AlcartaError(
      'forbidden',
      'mailbox_out_of_reach',
      `Only an admin token bound to "*" can ${verb} every mailbox.`,
      {
        field: 'mailboxes',
      },
    );
  }
  const outside = mailboxes.filter((id) => !actor.canSeeMailbox(id));
  return new AlcartaError(
    'forbidden',
    'mailbox_out_of_reach',
    `This admin token is not bound to: ${outside.join(', ')}; it can ${verb} only its own mailboxes.`,
    { field: 'mailboxes', mailbox_ids: outside },
  );
}
