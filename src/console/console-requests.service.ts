import { Injectable } from '@nestjs/common';
import { RequestState } from '../approvals/approval-request.entity';
import { ApprovalService } from '../approvals/approval.service';
import { Caller } from '../auth/caller';
import { AlcartaError, invalidRequest } from '../common/errors';
import { hasUnstorableText } from '../common/text-safety';
import { MailboxService } from '../mail/mailbox.service';
import { draftDocument } from './draft-html';

/** How many rows a list page shows: the newest ones. */
export const PAGE_SIZE = 100;
export const DECIDED_STATES: readonly RequestState[] = ['approved', 'rejected', 'expired', 'cancelled'];
const MAX_REASON_LENGTH = 2000;

export type ConsoleDecision = 'approved' | 'rejected';

/**
 * What the console's request pages show, through the same ApprovalService as the REST API: the
 * same visibility (only the credential's mailboxes), the same decisions, the same `decided_by`.
 */
@Injectable()
export class ConsoleRequestsService {
  constructor(
    private readonly approvals: ApprovalService,
    private readonly mailboxes: MailboxService,
  ) {}

  async pending(caller: Caller, mailboxId: string | undefined) {
    return this.listing(caller, 'pending', mailboxId);
  }

  async history(caller: Caller, state: string | undefined, mailboxId: string | undefined) {
    if (state !== undefined && !DECIDED_STATES.includes(state as RequestState)) {
      throw invalidRequest('invalid_state', `Choose one of: ${DECIDED_STATES.join(', ')}.`);
    }
    return this.listing(caller, state ? (state as RequestState) : DECIDED_STATES, mailboxId);
  }

  /** One request, with its mailbox's address and, for an email, the sanitized document of its HTML. */
  async request(caller: Caller, requestId: string) {
    const request = await this.approvals.getWithRequester(caller, requestId);
    const mailbox = await this.mailboxes.getVisible(caller, request.mailbox_id);
    const draftHtml = request.email?.html ? draftDocument(request.email.html) : null;
    return { request, mailboxAddress: mailbox.address, draftHtml };
  }

  /**
   * Approves or rejects as the session's credential. A request decided elsewhere meanwhile is not
   * an error for a person: the answer says so, and the request page shows who decided it.
   */
  async decide(
    caller: Caller,
    requestId: string,
    decision: ConsoleDecision,
    reason: unknown,
  ): Promise<'decided' | 'already_decided'> {
    try {
      await this.approvals.decide(caller, requestId, decision, reasonOf(reason));
      return 'decided';
    } catch (err) {
      if (err instanceof AlcartaError && err.reason === 'request_not_pending') return 'already_decided';
      throw err;
    }
  }

  private async listing(caller: Caller, state: RequestState | readonly RequestState[], mailboxId: string | undefined) {
    const [{ mailboxes }, { requests }] = await Promise.all([
      this.mailboxes.list(caller),
      this.approvals.list(caller, { state, mailboxId, limit: PAGE_SIZE }),
    ]);
    const addresses = new Map(mailboxes.map((m) => [m.mailbox_id, m.address]));
    return {
      mailboxes,
      requests: requests.map((r) => ({ ...r, mailbox_address: addresses.get(r.mailbox_id) ?? r.mailbox_id })),
      full: requests.length === PAGE_SIZE,
    };
  }
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
