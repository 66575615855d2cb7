import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { Caller } from '../kernel/caller';
import { CredentialRepository } from '../auth/credential.repository';
import { principalId } from '../auth/oauth/principal-claims';
import { AlcartaError } from '../kernel/errors';
import { MailboxService } from '../mail/mailbox.service';
import { mailboxAddressOf } from '../mail/mailbox-address';
import { ApprovalRequestEntity } from './approval-request.entity';

/** What recognises the credential that asked for a request. */
export type Requester = Pick<ApprovalRequestEntity, 'createdBy' | 'requesterClientId'>;

/** The answer to a decision by the credential that asked: 403, and nothing changes. */
export function selfApproval(): AlcartaError {
  return new AlcartaError(
    'forbidden',
    'self_approval',
    'The credential that asked for this request cannot approve or reject it: a person with another credential must decide it.',
  );
}

/**
 * Whether `caller` is the credential that asked, judged by identity alone: the same static token
 * or OAuth principal (iss + sub, its binding id), or the same OAuth client when one side is that
 * client acting for itself (client credentials: `sub` is the client id). A client's software holds
 * every token issued to it, so a token a person granted to the agent's own client decides nothing
 * the agent asked for, and the agent's client-credentials token decides nothing asked through it.
 */
export function isRequester(caller: Caller, requester: Requester): boolean {
  if (caller.tokenId === requester.createdBy) return true;
  const principal = caller.principal;
  if (!principal?.clientId || principal.clientId !== requester.requesterClientId) return false;
  const callerIsClient = principal.subject === principal.clientId;
  const requesterWasClient = requester.createdBy === principalId(principal.issuer, principal.clientId);
  return callerIsClient || requesterWasClient;
}

/**
 * Separation of duties: the credential that asked for a request never decides it, whichever way
 * the decision comes (REST, console, approval link). Beyond identity, a decider known by an email
 * address (an approval link's approver, an OAuth person's `email` claim) is the requester when the
 * requester can read mail sent to that address — the address of the request's own mailbox or of
 * any mailbox the requesting credential is bound to (plus-addressing included, as inbound SMTP
 * delivers it) — or when it is the requesting principal's own email.
 */
@Injectable()
export class SeparationOfDuties {
  constructor(
    private readonly credentials: CredentialRepository,
    private readonly mailboxes: MailboxService,
  ) {}

  /** Throws `self_approval` when `caller` speaks for the credential that asked for `request`. */
  async assertNotRequester(
    manager: EntityManager,
    caller: Caller,
    request: Requester & Pick<ApprovalRequestEntity, 'mailboxId'>,
  ): Promise<void> {
    if (await this.speaksForRequester(caller, request, manager)) throw selfApproval();
  }

  /** Whether `caller` is, or reads the mail of, the credential that asked for `request`. */
  async speaksForRequester(
    caller: Caller,
    request: Requester & Pick<ApprovalRequestEntity, 'mailboxId'>,
    manager?: EntityManager,
  ): Promise<boolean> {
    if (isRequester(caller, request)) return true;
    const email = caller.principal?.email;
    const address = email ? mailboxAddressOf(email) : undefined;
    if (address === undefined) return false;
    const requester = (await this.credentials.usable([request.createdBy], manager)).get(request.createdBy);
    const requesterEmail = requester?.principal?.email;
    if (requesterEmail && mailboxAddressOf(requesterEmail) === address) return true;
    const mailbox = await this.mailboxes.findByAddress(address, manager);
    if (!mailbox) return false;
    return mailbox.id === request.mailboxId || (requester?.canSeeMailbox(mailbox.id) ?? false);
  }
}
