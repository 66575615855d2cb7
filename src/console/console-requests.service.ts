import { Injectable } from '@nestjs/common';
import { RequestState } from '../approvals/approval-request.entity';
import { ApprovalService, RequestFilter } from '../approvals/approval.service';
import { mayDecide, NO_POLICY, policyView } from '../approvals/approval-policy';
import { MailboxPolicyRepository } from '../approvals/mailbox-policy.repository';
import { describeRemoved, draftDocument } from '../approvals/draft-sanitizer';
import { CONTENT_SHA256_PATTERN } from '../approvals/request-content';
import { Caller } from '../kernel/caller';
import { CredentialRepository } from '../auth/credential.repository';
import { AlcartaError, invalidRequest } from '../kernel/errors';
import { hasUnstorableText } from '../common/text-safety';
import { MailboxService } from '../mail/mailbox.service';

/** How many rows a list page shows: the newest ones. */
export const PAGE_SIZE = 100;
export const DECIDED_STATES: readonly RequestState[] = ['approved', 'rejected', 'expired', 'cancelled'];
const MAX_REASON_LENGTH = 2000;

export type ConsoleDecision = 'approved' | 'rejected';

/** What a decision form's post led to; the request page says it (`?notice=`). */
export const DECISION_OUTCOMES = [
  'decided',
  'recorded',
  'already_decided',
  'not_an_approver',
  'already_approved',
] as const;
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number];

/**
 * Whether the request page offers this person the decision form, and if not why: they asked for
 * it, the mailbox's policy does not list them, or they approved already and it waits for others.
 */
export type DecisionStanding = 'open' | 'requester' | 'not_an_approver' | 'already_approved';

/**
 * Who asked or decided, as a page shows it: the credential's name when the id names one, always
 * with the id itself (names are not unique). A deleted or unknown credential, the operator and a
 * decider's address (an OAuth decision records the email) have no name: the page shows the id.
 */
export interface Who {
  id: string;
  name: string | null;
}

/**
 * What the console's request pages show, through the same ApprovalService as the REST API: the
 * same visibility (only the credential's mailboxes), the same decisions, the same `decided_by`.
 */
@Injectable()
export class ConsoleRequestsService {
  constructor(
    private readonly approvals: ApprovalService,
    private readonly mailboxes: MailboxService,
    private readonly credentials: CredentialRepository,
    private readonly policies: MailboxPolicyRepository,
  ) {}

  async pending(caller: Caller, mailboxId: string | undefined) {
    return this.listing(caller, { state: 'pending', mailboxId, newestBy: 'created' });
  }

  /** What the header's pending count shows: every pending request of every mailbox the caller reaches. */
  pendingCount(caller: Caller): Promise<number> {
    return this.approvals.countPending(caller);
  }

  async history(caller: Caller, state: string | undefined, mailboxId: string | undefined) {
    if (state !== undefined && !DECIDED_STATES.includes(state as RequestState)) {
      throw invalidRequest('invalid_state', `Choose one of: ${DECIDED_STATES.join(', ')}.`);
    }
    const states = state ? (state as RequestState) : DECIDED_STATES;
    return this.listing(caller, { state: states, mailboxId, newestBy: 'decided' });
  }

  /**
   * One request, with its mailbox's address and connected account (whose state says whether an
   * approved email can leave through it now), who asked and who decided it, and, for an email, the
   * sanitized document of its HTML.
   */
  async request(caller: Caller, requestId: string) {
    const request = await this.approvals.getWithRequester(caller, requestId);
    const [mailbox, names, stored] = await Promise.all([
      this.mailboxes.get(caller, request.mailbox_id),
      this.credentials.namesOf(credentialIds([request])),
      this.policies.find(request.mailbox_id),
    ]);
    const approvals = request.approvals ?? [];
    const me = caller.decidedBy.toLowerCase();
    // The same checks as ApprovalService.decide, in its order, so the page offers only what would succeed.
    const standing: DecisionStanding = request.requested_by_caller
      ? 'requester'
      : !mayDecide(stored?.policy ?? NO_POLICY, caller)
        ? 'not_an_approver'
        : approvals.some((a) => a.by.toLowerCase() === me)
          ? 'already_approved'
          : 'open';
    const draftHtml = request.email?.html ? draftDocument(request.email.html) : null;
    return {
      request,
      removedFromDraft: request.sanitized ? describeRemoved(request.sanitized) : '',
      mailboxAddress: mailbox.address,
      mailboxSource: mailbox.source ?? null,
      askedBy: who(request.created_by, names),
      decidedBy: request.decided_by ? who(request.decided_by, names) : null,
      draftHtml,
      standing,
      approvals: approvalsOf(request, names),
      approvalsNeeded: (request.quorum ?? 1) - approvals.length,
    };
  }

  /** A mailbox's approval policy, read-only, for anyone who sees the mailbox (its approvers among them). */
  async policy(caller: Caller, mailboxId: string) {
    const mailbox = await this.mailboxes.get(caller, mailboxId);
    const stored = await this.policies.find(mailbox.mailbox_id);
    return {
      mailboxAddress: mailbox.address,
      hasPolicy: stored !== null,
      policy: policyView(mailbox.mailbox_id, stored?.policy ?? NO_POLICY, stored?.updatedAt ?? null),
    };
  }

  /**
   * Approves or rejects as the session's credential, the content the page showed (its form carries
   * the request's `content_sha256`). A request decided elsewhere meanwhile is not an error for a
   * person: the answer says so, and the request page shows who decided it; nor is a decision the
   * mailbox's policy refuses (not listed, or approved already).
   */
  async decide(
    caller: Caller,
    requestId: string,
    decision: ConsoleDecision,
    form: { reason: unknown; contentSha256: unknown },
  ): Promise<DecisionOutcome> {
    const basis = { contentSha256: shownContent(form.contentSha256), hashRequired: true };
    try {
      const after = await this.approvals.decide(caller, requestId, decision, reasonOf(form.reason), basis);
      // An approval short of the quorum is recorded; the request stays pending for the others.
      return after.state === 'pending' ? 'recorded' : 'decided';
    } catch (err) {
      if (err instanceof AlcartaError && err.reason === 'request_not_pending') return 'already_decided';
      // Not errors for a person: the policy's answer, shown on the request page (which says why).
      if (err instanceof AlcartaError && (err.reason === 'not_an_approver' || err.reason === 'already_approved'))
        return err.reason;
      throw err;
    }
  }

  /** A page of requests with their mailboxes' addresses and who asked and decided, named in one query. */
  private async listing(caller: Caller, filter: Omit<RequestFilter, 'limit'>) {
    const [{ mailboxes }, { requests }] = await Promise.all([
      this.mailboxes.list(caller),
      this.approvals.listWithRequesters(caller, { ...filter, limit: PAGE_SIZE }),
    ]);
    const names = await this.credentials.namesOf(credentialIds(requests));
    const addresses = new Map(mailboxes.map((m) => [m.mailbox_id, m.address]));
    return {
      mailboxes,
      requests: requests.map((r) => ({
        ...r,
        mailbox_address: addresses.get(r.mailbox_id) ?? r.mailbox_id,
        asked_by: who(r.created_by, names),
        decider: r.decided_by ? who(r.decided_by, names) : null,
        approvals_shown: approvalsOf(r, names),
      })),
      full: requests.length === PAGE_SIZE,
      newestBy: filter.newestBy,
    };
  }
}

type Named = { created_by: string; decided_by?: string; approvals?: ReadonlyArray<{ by: string }> };

/** The ids of the credentials that asked for, decided and (under a quorum) approved these requests. */
function credentialIds(requests: readonly Named[]): string[] {
  return requests.flatMap((r) => [
    r.created_by,
    ...(r.decided_by ? [r.decided_by] : []),
    ...(r.approvals ?? []).map((a) => a.by),
  ]);
}

/** The approvals so far of a request under a quorum, each with who gave it as a page names them. */
function approvalsOf(r: Named, names: ReadonlyMap<string, string>) {
  return (r.approvals ?? []).map((a) => ({ ...a, who: who(a.by, names) }));
}

function who(id: string, names: ReadonlyMap<string, string>): Who {
  return { id, name: names.get(id) ?? null };
}

/** The hash a decision form carries (every form the console renders has one), if well-formed. */
function shownContent(value: unknown): string | undefined {
  return typeof value === 'string' && CONTENT_SHA256_PATTERN.test(value) ? value : undefined;
}

function reasonOf(reason: unknown): string | null {
  if (reason === undefined || reason === null) return null;
  if (typeof reason !== 'string') throw invalidRequest('invalid_reason', 'The reason must be text.');
  const trimmed = reason.trim();
  if (trimmed.length > MAX_REASON_LENGTH) {
    throw invalidRequest('reason_too_long', `The reason may be at most ${MAX_REASON_LENGTH} characters.`);
  }
  if (hasUnstorableText(trimmed))
    throw invalidRequest('invalid_characters', 'The reason contains characters that cannot be stored.');
  return trimmed === '' ? null : trimmed;
}
