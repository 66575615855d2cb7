import { Injectable } from '@nestjs/common';
import { ApprovalRequestEntity } from '../approvals/approval-request.entity';
import { ApprovalService, DecisionBasis } from '../approvals/approval.service';
import { APPROVAL_BY_ADDRESS, mayDecide } from '../approvals/approval-policy';
import { MailboxPolicyRepository } from '../approvals/mailbox-policy.repository';
import { SeparationOfDuties } from '../approvals/separation-of-duties';
import { Caller, OPERATOR } from '../kernel/caller';
import { CredentialRepository } from '../auth/credential.repository';
import { AlcartaError } from '../kernel/errors';
import { MailboxService } from '../mail/mailbox.service';
import { ApprovalLinkEntity } from './approval-link.entity';
import { ApprovalLinkRepository } from './approval-link.repository';
import { linkTokenHash } from './approval-mail.service';

export type LinkDecision = 'approved' | 'rejected';

/** Why a link cannot decide: each gets its own plain page and 4xx status. */
export type LinkRefusal =
  | { kind: 'unknown' }
  | { kind: 'used'; state: string; decidedBy: string | null }
  | { kind: 'expired' }
  | { kind: 'decided'; state: string; decidedBy: string | null }
  /** The link's address is the requester's own, or one it reads: it cannot decide (separation of duties). */
  | { kind: 'self_approval' }
  /** The mailbox's policy lists approvers, and the link's address is not among them. */
  | { kind: 'not_an_approver' }
  /** This approver has already approved the request, which waits for more approvers. */
  | { kind: 'already_approved' };

export type LinkLookup = { ok: true; link: ApprovalLinkEntity; request: ApprovalRequestEntity } | LinkRefusal;

/** A usable link's confirmation page: the request, its mailbox's address, and who asked. */
export type LinkConfirmation =
  | { ok: true; link: ApprovalLinkEntity; request: ApprovalRequestEntity; mailboxAddress: string; askedBy: string }
  | LinkRefusal;

/**
 * Approval by email (docs/approvers.md), the deciding half. The link token is the capability: whoever holds
 * it may decide that one request, as the approver it was mailed to, once. Looking at a link never
 * changes anything (mail scanners open links); only `decide`, the POST of its page, does.
 */
@Injectable()
export class ApprovalLinksService {
  constructor(
    private readonly links: ApprovalLinkRepository,
    private readonly approvals: ApprovalService,
    private readonly mailboxes: MailboxService,
    private readonly credentials: CredentialRepository,
    private readonly separation: SeparationOfDuties,
    private readonly policies: MailboxPolicyRepository,
  ) {}

  /** `look`, plus what the approver needs to recognise the request: the mailbox and who asked. */
  async confirmation(token: string): Promise<LinkConfirmation> {
    const found = await this.look(token);
    if (!('ok' in found)) return found;
    const { link, request } = found;
    if (await this.separation.speaksForRequester(approverCaller(link), request)) return { kind: 'self_approval' };
    const policy = await this.policies.find(request.mailboxId);
    if (policy && !mayDecide(policy.policy, approverCaller(link))) return { kind: 'not_an_approver' };
    const [mailbox, names] = await Promise.all([
      this.mailboxes.getVisible(OPERATOR, request.mailboxId),
      this.credentials.namesOf([request.createdBy]),
    ]);
    const name = names.get(request.createdBy);
    const askedBy = name ? `${name} (${request.createdBy})` : request.createdBy;
    return { ...found, mailboxAddress: mailbox.address, askedBy };
  }

  /** What the link's page shows: the request to confirm, or why the link no longer works. */
  async look(token: string): Promise<LinkLookup> {
    return lookAt(await this.links.findWithRequest(linkTokenHash(token)));
  }

  /**
   * decide() for a reply to the link's mail (ApprovalReplyService): the same checks and the same
   * decision as the link's page, of the request as it stands (its content never changes once made,
   * so it is what the mail showed). Other refusals of ApprovalService (`content_changed`) come back
   * as errors, for the caller to explain.
   */
  async decideByReply(link: ApprovalLinkEntity, decision: LinkDecision, reason: string | null): Promise<LinkLookup> {
    return this.decideLink(lookAt(link), decision, reason, {});
  }

  /**
   * Decides the link's request as its approver, then spends every link of the request. A request
   * decided meanwhile (another approver, the console, the API) or expired is refused, not an error.
   * The decision is of the content the page showed (`contentSha256`); other content is a conflict
   * (`content_changed`), and the link stays usable.
   */
  async decide(
    token: string,
    decision: LinkDecision,
    reason: string | null,
    contentSha256: string | undefined,
  ): Promise<LinkLookup> {
    return this.decideLink(await this.look(token), decision, reason, { contentSha256, hashRequired: true });
  }

  private async decideLink(
    found: LinkLookup,
    decision: LinkDecision,
    reason: string | null,
    basis: DecisionBasis,
  ): Promise<LinkLookup> {
    if (!('ok' in found)) return found;
    const { link } = found;
    try {
      const decided = await this.approvals.decide(approverCaller(link), link.requestId, decision, reason, basis);
      // An approval short of the quorum spends this approver's link only: the others still count.
      if (decided.state === 'pending') await this.links.markUsed(link.tokenHash);
      else await this.links.markRequestUsed(link.requestId);
      return {
        ...found,
        request: {
          ...found.request,
          state: decided.state,
          decidedBy: decided.decided_by ?? null,
          approvals: decided.approvals ?? [],
        },
      };
    } catch (err) {
      const refusal = err instanceof AlcartaError ? PERSONAL_REFUSALS[err.reason] : undefined;
      if (refusal) return { kind: refusal };
      if (!(err instanceof AlcartaError) || err.reason !== 'request_not_pending') throw err;
      await this.links.markRequestUsed(link.requestId);
      const now = lookAt(await this.links.findWithRequest(link.tokenHash));
      // The request was not pending: `lookAt` now names why (it cannot answer ok).
      return 'ok' in now ? { kind: 'used', state: now.request.state, decidedBy: now.request.decidedBy } : now;
    }
  }
}

/** What a link (with its request) can still do: decide, or why not. */
function lookAt(link: ApprovalLinkEntity | null): LinkLookup {
  if (!link?.request) return { kind: 'unknown' };
  const request = link.request;
  if (request.state === 'expired' || link.expiresAt.getTime() <= Date.now()) return { kind: 'expired' };
  if (link.usedAt) return { kind: 'used', state: request.state, decidedBy: request.decidedBy };
  if (request.state !== 'pending') return { kind: 'decided', state: request.state, decidedBy: request.decidedBy };
  return { ok: true, link, request };
}

/** Refusals of the approver in person: the link stays as it was and the page says why. */
const PERSONAL_REFUSALS: Record<string, 'self_approval' | 'not_an_approver' | 'already_approved' | undefined> = {
  self_approval: 'self_approval',
  not_an_approver: 'not_an_approver',
  already_approved: 'already_approved',
};

/**
 * The approver as ApprovalService sees it: one mailbox, the right to decide, and the address the
 * link was mailed to as `decided_by` (carried the way an OAuth principal's email is).
 */
function approverCaller(link: ApprovalLinkEntity): Caller {
  return new Caller(
    `approval-link:${link.tokenHash.slice(0, 12)}`,
    new Set(['approvals:decide']),
    [link.request!.mailboxId],
    {
      principal: { issuer: APPROVAL_BY_ADDRESS, subject: link.email, clientId: null, email: link.email },
    },
  );
}
