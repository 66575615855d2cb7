import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { MessageEntity } from '../mail/message.entity';
import { Caller } from '../kernel/caller';
import { conflict, invalidRequest, notFound } from '../kernel/errors';
import { newId } from '../common/ids';
import { EventLog } from '../events/event-log';
import { AuditLog } from '../audit/audit-log';
import { MailboxService } from '../mail/mailbox.service';
import { MessageService } from '../mail/message.service';
import { DeliveryView } from '../outbox/delivery.views';
import { OutboxService } from '../outbox/outbox.service';
import { ApprovalRequestEntity, EmailDraft, RequestKind, RequestState } from './approval-request.entity';
import { ApprovalRequestRepository, RequestListFilter } from './approval-request.repository';
import { noneRemoved, SanitizedCounts, sanitizeDraftHtml } from './draft-sanitizer';
import { contentOfRequest, contentSha256 } from './request-content';
import { createdRequestView, requestView } from './request.views';
import { SeparationOfDuties } from './separation-of-duties';
import {
  ApprovalPolicy,
  judgeRecipients,
  mayDecide,
  NO_POLICY,
  notAnApprover,
  recipientBlocked,
  addApproval,
  escalationTime,
} from './approval-policy';
import { MailboxPolicyRepository } from './mailbox-policy.repository';

export const DEFAULT_EXPIRY_SECONDS = 24 * 3600;
export const MAX_EXPIRY_SECONDS = 7 * 24 * 3600;
const SWEEP_BATCH = 500;
/** `decided_by` of a request the mailbox's policy approved by itself (recipients all routine). */
export const DECIDED_BY_POLICY = 'policy';

export interface NewApproval {
  mailboxId: string;
  title: string;
  details?: string;
  expiresInSeconds?: number;
}

export interface NewEmail {
  mailboxId: string;
  to: string[];
  cc?: string[];
  subject: string;
  text: string;
  html?: string;
  inReplyToMessageId?: string;
  expiresInSeconds?: number;
}

type Decision = 'approved' | 'rejected' | 'cancelled';

/** What a person's decision says about what they saw. */
export interface DecisionBasis {
  /** The `content_sha256` of the request as the person saw it; absent: the request as it stands. */
  contentSha256?: string;
  /**
   * The decision must say what it saw: a form of Alcarta's own pages always carries the hash, so one
   * without it (or with a malformed one) is refused as incomplete, once the request is known to be
   * decidable by this caller.
   */
  hashRequired?: boolean;
}

/** What a new request holds besides its id, state and dates. */
interface NewRequest {
  mailboxId: string;
  kind: RequestKind;
  title: string;
  details: string | null;
  email: EmailDraft | null;
  sanitized: SanitizedCounts | null;
  expiresInSeconds?: number;
}

/** Which requests a list shows; `newestBy` as in RequestListFilter (by creation unless said). */
export type RequestFilter = Omit<RequestListFilter, 'access'>;

/**
 * Runs inside the transaction that creates a request, so what it writes commits (or rolls back)
 * with the request: approval by email queues its mails here (docs/approvers.md).
 */
export type RequestCreatedHook = (manager: EntityManager, request: ApprovalRequestEntity) => Promise<void>;

/**
 * Runs inside the transaction that escalates a request, with the addresses the mailbox's policy
 * escalates to as it stands then: approval by email queues the escalation mails here.
 */
export type RequestEscalatedHook = (
  manager: EntityManager,
  request: ApprovalRequestEntity,
  escalateTo: readonly string[],
) => Promise<void>;

/** Who escalates a request in the audit trail: the server's own deadline sweep, no caller. */
const ESCALATION_ACTOR = { system: 'escalation' } as const;

/**
 * The life of an approval request: pending → approved | rejected | expired | cancelled. Every
 * transition happens under the request's row lock, appends its event and rings the doorbell in the
 * same transaction. A request past its expiry is expired by whoever touches it first (a reader, a
 * decision or the sweeper), so a late approval can never win over the deadline.
 */
@Injectable()
export class ApprovalService {
  private readonly createdHooks: RequestCreatedHook[] = [];
  private readonly escalatedHooks: RequestEscalatedHook[] = [];

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly requests: ApprovalRequestRepository,
    private readonly mailboxes: MailboxService,
    private readonly messages: MessageService,
    private readonly outbox: OutboxService,
    private readonly eventLog: EventLog,
    private readonly separation: SeparationOfDuties,
    private readonly audit: AuditLog,
    private readonly policies: MailboxPolicyRepository,
  ) {}

  /** Lets another module act on every new request without approvals depending on it. */
  onCreated(hook: RequestCreatedHook): void {
    this.createdHooks.push(hook);
  }

  /** As onCreated, for every escalation (the escalation mails). */
  onEscalated(hook: RequestEscalatedHook): void {
    this.escalatedHooks.push(hook);
  }

  async requestApproval(caller: Caller, input: NewApproval) {
    await this.mailboxes.getVisible(caller, input.mailboxId);
    return this.create(caller, {
      mailboxId: input.mailboxId,
      kind: 'approval',
      title: input.title,
      details: input.details ?? null,
      email: null,
      sanitized: null,
      expiresInSeconds: input.expiresInSeconds,
    });
  }

  /**
   * An email draft to approve. Its HTML is sanitized here, before anything is stored: the person
   * approves the sanitized draft, and that is what leaves. What was removed is part of the answer.
   */

  async requestEmail(caller: Caller, input: NewEmail) {
    const mailbox = await this.mailboxes.getVisible(caller, input.mailboxId);
    if (input.inReplyToMessageId) await this.messages.assertInMailbox(caller, mailbox.id, input.inReplyToMessageId);
    const sanitized = input.html === undefined ? undefined : sanitizeDraftHtml(input.html);
    const draft: EmailDraft = {
      from: mailbox.address,
      to: input.to,
      cc: input.cc ?? [],
      subject: input.subject,
      text: input.text,
      // HTML with nothing left to show (only a script, say) is no HTML part at all.
      html: sanitized?.html.trim() ? sanitized.html : null,
      in_reply_to_message_id: input.inReplyToMessageId ?? null,
    };
    return this.create(caller, {
      mailboxId: mailbox.id,
      kind: 'send_email',
      title: `Send email "${input.subject}" to ${input.to.join(', ')}`,
      details: null,
      email: draft,
      sanitized: sanitized?.removed ?? noneRemoved(),
      expiresInSeconds: input.expiresInSeconds,
    });
  }

  async get(caller: Caller, requestId: string) {
    return this.view(await this.current(caller, requestId));
  }

  /**
   * The request as `get` shows it, with the credential that asked for it (the console names it) and
   * whether that is `caller` itself (then the console offers no decision).
   */
  async getWithRequester(caller: Caller, requestId: string) {
    const request = await this.current(caller, requestId);
    return {
      ...(await this.view(request)),
      created_by: request.createdBy,
      requested_by_caller: await this.separation.speaksForRequester(caller, request),
    };
  }

  async list(caller: Caller, filter: RequestFilter) {
    const rows = await this.visibleRows(caller, filter);
    const deliveries = await this.deliveriesOf(rows);
    return { requests: rows.map((r) => requestView(r, deliveries.get(r.id))) };
  }

  /** The requests as `list` shows them, each with the credential that asked for it (the console names it). */
  async listWithRequesters(caller: Caller, filter: RequestFilter) {
    const rows = await this.visibleRows(caller, filter);
    const deliveries = await this.deliveriesOf(rows);
    return { requests: rows.map((r) => ({ ...requestView(r, deliveries.get(r.id)), created_by: r.createdBy })) };
  }

  /** How many requests the caller can see are pending, in every mailbox it reaches. */
  countPending(caller: Caller): Promise<number> {
    return this.requests.countPending(caller.mailboxAccess);
  }

  /** Withdrawing a request is not a decision about it: the credential that asked may cancel it. */
  cancel(caller: Caller, requestId: string) {
    return this.decide(caller, requestId, 'cancelled', null);
  }

  /**
   * Approve, reject or cancel a pending request; anything else is a conflict naming the state. The
   * credential that asked may cancel, never approve or reject (`self_approval`). An approval or
   * rejection is of the content the person saw (`basis`): when that is no longer the request's
   * content, nothing is decided (409 `content_changed`).
   */
  async decide(
    caller: Caller,
    requestId: string,
    decision: Decision,
    reason: string | null,
    basis: DecisionBasis = {},
  ) {
    const outcome = await this.dataSource.transaction(async (manager) => {
      const request = await this.requests.lockVisible(manager, requestId, caller.mailboxAccess);
      if (!request) throw notFound('request', requestId);
      if (decision !== 'cancelled') {
        await this.separation.assertNotRequester(manager, caller, request);
        if (!mayDecide(await this.policyOf(manager, request.mailboxId), caller)) throw notAnApprover();
      }
      if (request.state === 'pending' && isOverdue(request)) {
        await this.transition(manager, request, 'expired', null, null);
        return { request, applied: false };
      }
      if (request.state !== 'pending') return { request, applied: false };
      if (decision !== 'cancelled') {
        assertDecidable(request, decision, basis);
        const approval = { by: caller.decidedBy, at: new Date().toISOString(), reason };
        if (decision === 'approved' && addApproval(request, approval) === 'recorded') {
          await this.requests.update(manager, request);
          await this.audit.append(manager, {
            action: 'request_approval_recorded',
            actor: caller,
            subject: {
              request_id: request.id,
              mailbox_id: request.mailboxId,
              by: caller.decidedBy,
              approvals: request.approvals.length,
              quorum: request.quorum,
              content_sha256: request.contentSha256,
              reason,
            },
          });
          return { request, applied: true, delivery: undefined };
        }
        request.decidedContentSha256 = request.contentSha256;
      }
      const delivery = await this.transition(manager, request, decision, caller.decidedBy, reason);
      // An approval link's decision is recorded here too: its actor's issuer is `approval-link`.
      await this.audit.append(manager, {
        action: `request_${decision}`,
        actor: caller,
        subject: {
          request_id: request.id,
          mailbox_id: request.mailboxId,
          decided_by: caller.decidedBy,
          content_sha256: request.contentSha256,
          reason,
        },
      });
      return { request, applied: true, delivery };
    });
    if (!outcome.applied) {
      throw conflict('request_not_pending', `The request is already ${outcome.request.state}.`, {
        request_id: requestId,
        state: outcome.request.state,
      });
    }
    // The delivery as queued in the decision's transaction: the answer needs no read after the commit.
    return requestView(outcome.request, outcome.delivery);
  }

  /** Moves every overdue pending request to `expired`; returns how many it moved. */
  async expireOverdue(): Promise<number> {
    return this.dataSource.transaction(async (manager) => {
      const overdue = await this.requests.lockOverdue(manager, SWEEP_BATCH);
      for (const request of overdue) await this.transition(manager, request, 'expired', null, null);
      return overdue.length;
    });
  }

  /**
   * Escalates every pending request whose escalation time came with no decision; returns how many.
   * Each is escalated once: `escalated_at` is set under the row lock (SKIP LOCKED, so replicas
   * sweeping at once share the work) in the transaction that records the event, runs the hooks and
   * appends the audit entry, so a crash anywhere before the commit leaves it to the next sweep.
   * Whom to tell is the mailbox's policy as it stands now, not as it stood at request time.
   */
  async escalateDue(): Promise<number> {
    return this.dataSource.transaction(async (manager) => {
      const due = await this.requests.lockEscalationDue(manager, SWEEP_BATCH);
      const escalated: Array<{ request: ApprovalRequestEntity; escalateTo: readonly string[] }> = [];
      for (const request of due) {
        const escalateTo = (await this.policyOf(manager, request.mailboxId)).escalateTo;
        request.escalatedAt = new Date();
        await this.requests.update(manager, request);
        await this.eventLog.appendEscalationEvent(manager, {
          type: 'request_escalated',
          request_id: request.id,
          mailbox_id: request.mailboxId,
          escalated_at: request.escalatedAt.toISOString(),
          escalate_to: [...escalateTo],
        });
        for (const hook of this.escalatedHooks) await hook(manager, request, escalateTo);
        escalated.push({ request, escalateTo });
      }
      // The audit head's lock last, after every row lock of the batch.
      for (const { request, escalateTo } of escalated) {
        await this.audit.append(manager, {
          action: 'request_escalated',
          actor: ESCALATION_ACTOR,
          subject: { request_id: request.id, mailbox_id: request.mailboxId, escalate_to: [...escalateTo] },
        });
      }
      return escalated.length;
    });
  }

  private async visibleRows(caller: Caller, filter: RequestFilter): Promise<ApprovalRequestEntity[]> {
    if (filter.mailboxId) await this.mailboxes.getVisible(caller, filter.mailboxId);
    return this.requests.list({ access: caller.mailboxAccess, ...filter });
  }

  /** The visible request as it stands now: a pending one past its expiry is expired first. */
  private async current(caller: Caller, requestId: string): Promise<ApprovalRequestEntity> {
    const request = await this.requests.findVisible(requestId, caller.mailboxAccess);
    if (!request) throw notFound('request', requestId);
    if (request.state === 'pending' && isOverdue(request)) return this.expire(caller, requestId);
    return request;
  }

  /** The request with the delivery of its email, if it has one. */
  private async view(request: ApprovalRequestEntity) {
    const deliveries = await this.deliveriesOf([request]);
    return requestView(request, deliveries.get(request.id));
  }

  /** The deliveries of these requests' recorded emails, by request id, in one query. */
  private async deliveriesOf(requests: readonly ApprovalRequestEntity[]): Promise<Map<string, DeliveryView>> {
    const sent = requests.filter(
      (r): r is ApprovalRequestEntity & { sentMessageId: string } => r.sentMessageId !== null,
    );
    if (sent.length === 0) return new Map();
    const byMessage = await this.outbox.deliveriesOf(sent.map((r) => r.sentMessageId));
    return new Map(
      sent.flatMap((r) => (byMessage.has(r.sentMessageId) ? [[r.id, byMessage.get(r.sentMessageId)!]] : [])),
    );
  }

  private async expire(caller: Caller, requestId: string): Promise<ApprovalRequestEntity> {
    return this.dataSource.transaction(async (manager) => {
      const request = await this.requests.lockVisible(manager, requestId, caller.mailboxAccess);
      if (!request) throw notFound('request', requestId);
      if (request.state === 'pending' && isOverdue(request))
        await this.transition(manager, request, 'expired', null, null);
      return request;
    });
  }

  /**
   * Makes a request under its mailbox's policy: the policy's default expiry when none is asked,
   * its quorum and escalation time; a send to a blocked recipient is refused and nothing is made;
   * a send to routine recipients only (policy `auto_approve`) is approved at once by the policy,
   * in the same transaction, and nobody is asked.
   */
  private async create(caller: Caller, input: NewRequest) {
    if (input.expiresInSeconds !== undefined && input.expiresInSeconds > MAX_EXPIRY_SECONDS) {
      throw invalidRequest(
        'expiry_exceeds_limit',
        `expires_in_seconds may be at most ${MAX_EXPIRY_SECONDS} (7 days).`,
        {
          max_expires_in_seconds: MAX_EXPIRY_SECONDS,
        },
      );
    }
    // One clock for both, so expires_at is exactly created_at + expires_in_seconds.
    const now = new Date();
    const request = await this.dataSource.transaction(async (manager) => {
      const policy = await this.policyOf(manager, input.mailboxId);
      const verdict = input.email ? judgeRecipients(policy, [...input.email.to, ...input.email.cc]) : undefined;
      if (verdict && 'blocked' in verdict) throw recipientBlocked(verdict.blocked);
      const expiresInSeconds = input.expiresInSeconds ?? policy.expiresAfterSeconds ?? DEFAULT_EXPIRY_SECONDS;
      const expiresAt = new Date(now.getTime() + expiresInSeconds * 1000);
      const created = await this.requests.insert(manager, {
        id: newId('chk'),
        mailboxId: input.mailboxId,
        kind: input.kind,
        state: 'pending',
        title: input.title,
        details: input.details,
        email: input.email,
        sanitized: input.sanitized,
        contentSha256: contentSha256(contentOfRequest(input)),
        decidedContentSha256: null,
        createdBy: caller.tokenId,
        requesterClientId: caller.principal?.clientId ?? null,
        createdAt: now,
        expiresAt,
        decidedAt: null,
        decidedBy: null,
        reason: null,
        sentMessageId: null,
        quorum: policy.quorum,
        approvals: [],
        escalateAt: escalationTime(policy, now, expiresAt),
        escalatedAt: null,
      });
      // In addition to (not instead of) the first state change, which waits and the decision feed read.
      await this.eventLog.appendRequestCreatedEvent(manager, {
        type: 'request_created',
        request_id: created.id,
        mailbox_id: created.mailboxId,
        kind: created.kind,
        title: created.title,
        created_at: created.createdAt.toISOString(),
        expires_at: created.expiresAt.toISOString(),
        ...(created.email && { to: created.email.to, cc: created.email.cc, subject: created.email.subject }),
      });
      await this.eventLog.appendRequestEvent(manager, input.mailboxId, {
        type: 'request_state_changed',
        request_id: created.id,
        state: 'pending',
        previous_state: null,
        changed_at: created.createdAt.toISOString(),
      });
      const approvedByPolicy = verdict !== undefined && 'autoApprove' in verdict && verdict.autoApprove;
      if (approvedByPolicy) {
        created.decidedContentSha256 = created.contentSha256;
        await this.transition(manager, created, 'approved', DECIDED_BY_POLICY, null);
      } else {
        for (const hook of this.createdHooks) await hook(manager, created);
      }
      const subject = { request_id: created.id, mailbox_id: created.mailboxId, content_sha256: created.contentSha256 };
      await this.audit.append(manager, {
        action: 'request_created',
        actor: caller,
        subject: { ...subject, kind: created.kind },
      });
      if (approvedByPolicy) {
        await this.audit.append(manager, {
          action: 'request_approved',
          actor: caller,
          subject: { ...subject, decided_by: DECIDED_BY_POLICY, reason: null },
        });
      }
      return created;
    });
    return createdRequestView(request);
  }

  /** The policy of a mailbox as it stands in `manager`'s transaction. */
  private async policyOf(manager: EntityManager, mailboxId: string): Promise<ApprovalPolicy> {
    return (await this.policies.find(mailboxId, manager))?.policy ?? NO_POLICY;
  }

  /** The one place a request changes state. An approved email is recorded in its mailbox here. */
  private async transition(
    manager: EntityManager,
    request: ApprovalRequestEntity,
    to: RequestState,
    decidedBy: string | null,
    reason: string | null,
  ): Promise<DeliveryView | undefined> {
    const from = request.state;
    const now = new Date();
    request.state = to;
    request.decidedAt = now;
    request.decidedBy = decidedBy;
    request.reason = reason;
    let sent: MessageEntity | undefined;
    if (to === 'approved' && request.kind === 'send_email' && request.email) {
      sent = await this.messages.recordOutbound(manager, request.mailboxId, {
        from: request.email.from,
        to: request.email.to,
        cc: request.email.cc,
        subject: request.email.subject,
        text: request.email.text,
        html: request.email.html,
        inReplyToMessageId: request.email.in_reply_to_message_id,
      });
      request.sentMessageId = sent.id;
    }
    await this.requests.update(manager, request);
    await this.eventLog.appendRequestEvent(manager, request.mailboxId, {
      type: 'request_state_changed',
      request_id: request.id,
      state: to,
      previous_state: from,
      changed_at: now.toISOString(),
    });
    return sent ? this.outbox.enqueue(manager, sent, request.id) : undefined;
  }
}

/**
 * A person decides only the content they saw: when they say which (`basis`), it must be the request's.
 * An approval also needs content that is still what was asked (the stored content hashes to the hash
 * fixed at creation; a row changed behind the service's back does not) and, for an email, a draft
 * that was sanitized when it was requested (one stored before that was never shown as it would
 * leave). Rejecting such a request stays possible: it sends nothing.
 */
function assertDecidable(
  request: ApprovalRequestEntity,
  decision: 'approved' | 'rejected',
  basis: DecisionBasis,
): void {
  const refuse = (message: string) =>
    conflict('content_changed', message, { request_id: request.id, content_sha256: request.contentSha256 });
  if (basis.hashRequired && basis.contentSha256 === undefined) {
    throw invalidRequest(
      'invalid_content_sha256',
      'This form does not say which version of the request it shows. Reload the page and decide again.',
    );
  }
  if (basis.contentSha256 !== undefined && basis.contentSha256 !== request.contentSha256) {
    throw refuse('The request is not what you saw: reload it and decide again.');
  }
  if (decision === 'rejected') return;
  if (contentSha256(contentOfRequest(request)) !== request.contentSha256) {
    throw refuse('The stored request no longer matches what was asked; it cannot be approved.');
  }
  if (request.kind === 'send_email' && request.sanitized === null && request.email?.html) {
    throw refuse('This draft was stored before drafts were sanitized; ask the agent to send it again.');
  }
}

function isOverdue(request: ApprovalRequestEntity): boolean {
  return request.expiresAt.getTime() <= Date.now();
}
