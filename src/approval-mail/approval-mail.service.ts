import { createHash, randomBytes } from 'node:crypto';
import { Injectable, OnModuleInit } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { ApprovalRequestEntity } from '../approvals/approval-request.entity';
import { ApprovalService } from '../approvals/approval.service';
import { ApprovalPolicy } from '../approvals/approval-policy';
import { MailboxPolicyRepository } from '../approvals/mailbox-policy.repository';
import { OPERATOR } from '../kernel/caller';
import { CredentialRepository } from '../auth/credential.repository';
import { randomBase62 } from '../common/ids';
import { AppConfig } from '../config/app-config';
import { EventLog } from '../events/event-log';
import { MailboxService } from '../mail/mailbox.service';
import { domainOf, OutboundMessageFields } from '../outbox/outbound-mail';
import { afterTemporaryFailure } from '../outbox/retry-policy';
import { SmtpRelay } from '../outbox/smtp-relay';
import { approvalMail, escalationMail, replyAnswerMail } from './approval-mail-text';
import { ApprovalMailEntity } from './approval-mail.entity';
import { ApprovalMailChanges, ApprovalMailRepository } from './approval-mail.repository';
import { ApprovalLinkRepository } from './approval-link.repository';
import { MailboxApproverRepository } from './mailbox-approver.repository';

/** The SHA-256 (hex) of a link token: all the database ever holds of it. */
export function linkTokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * How one attempt of an approval mail went: what the relay answered (`obsolete`: nothing was sent,
 * the request no longer waits), and the status recorded; undefined when the claim was lost.
 */
export interface ApprovalMailAttempt {
  outcome: 'sent' | 'temporary' | 'permanent' | 'obsolete';
  status: ApprovalMailChanges['status'] | undefined;
}

/**
 * Approval by email (docs/approvers.md), the mailing half: every new request of a mailbox with approvers
 * queues one mail per approver in the request's own transaction (so a request never exists
 * without its mails, nor mails without their request), and `send` delivers one claimed mail
 * through the outbox's relay. The link token is made at send time and only its hash is stored;
 * each attempt makes its own link, so a retried mail carries a fresh one.
 */
@Injectable()
export class ApprovalMailService implements OnModuleInit {
  constructor(
    private readonly config: AppConfig,
    private readonly approvals: ApprovalService,
    private readonly approvers: MailboxApproverRepository,
    private readonly mails: ApprovalMailRepository,
    private readonly links: ApprovalLinkRepository,
    private readonly mailboxes: MailboxService,
    private readonly credentials: CredentialRepository,
    private readonly relay: SmtpRelay,
    private readonly eventLog: EventLog,
    private readonly policies: MailboxPolicyRepository,
  ) {}

  onModuleInit(): void {
    // Without a relay nothing could be sent: no mail is queued at all.
    if (!this.relay.configured) return;
    this.approvals.onCreated((manager, request) => this.queue(manager, request));
    this.approvals.onEscalated((manager, request, escalateTo) => this.queueEscalation(manager, request, escalateTo));
  }

  /**
   * Queues a mail to each approver of the request's mailbox. With a policy that lists approvers,
   * its `email:` entries are mailed too, and an address of the mailbox's approvers list that the
   * policy does not name is not: its link could decide nothing.
   */
  private async queue(manager: EntityManager, request: ApprovalRequestEntity): Promise<void> {
    const policy = (await this.policies.find(request.mailboxId, manager))?.policy;
    const approvers = policyRecipients(await this.approvers.list(request.mailboxId, manager), policy);
    await this.queueMails(manager, request, approvers, 'approval');
  }

  /** Queues the escalation mail to each address the policy escalates to, in the escalation's transaction. */
  private queueEscalation(
    manager: EntityManager,
    request: ApprovalRequestEntity,
    escalateTo: readonly string[],
  ): Promise<void> {
    return this.queueMails(manager, request, escalateTo, 'escalation');
  }

  private async queueMails(
    manager: EntityManager,
    request: ApprovalRequestEntity,
    recipients: readonly string[],
    kind: 'approval' | 'escalation',
  ): Promise<void> {
    if (recipients.length === 0) return;
    await this.mails.queue(
      manager,
      recipients.map((email) => ({ requestId: request.id, email, kind })),
    );
    // The outbox's doorbell: the approval mail worker of some replica picks the mails up at once.
    await this.eventLog.ringDoorbell(manager, { kind: 'outbox', mailboxId: request.mailboxId });
  }

  /**
   * One delivery attempt of a mail `replicaId` claimed; records its outcome while the claim holds.
   * An approval (or escalation) mail of a request that no longer waits is not sent; an answer to a
   * reply is sent whatever the request's state, which is often what it explains.
   */
  async send(replicaId: string, mail: ApprovalMailEntity): Promise<ApprovalMailAttempt> {
    const request = mail.request!;
    if (mail.kind !== 'reply_answer' && (request.state !== 'pending' || request.expiresAt.getTime() <= Date.now())) {
      const finished = await this.mails.finishClaim(mail.id, replicaId, { status: 'obsolete' });
      return { outcome: 'obsolete', status: finished ? 'obsolete' : undefined };
    }
    const message = mail.kind === 'reply_answer' ? await this.answerOf(mail) : await this.requestMailOf(mail);
    const outcome = await this.relay.send(message, { kind: 'approval_mail', mailboxId: request.mailboxId });
    let changes: ApprovalMailChanges;
    if (outcome.kind === 'sent') {
      changes = { status: 'sent', error: null };
    } else if (outcome.kind === 'permanent') {
      changes = { status: 'failed', error: outcome.error };
    } else {
      const next = afterTemporaryFailure(mail, new Date(), {
        baseMs: this.config.smtpRetryBaseMs,
        maxMs: this.config.smtpRetryMaxMs,
      });
      changes =
        next.status === 'retrying'
          ? { status: 'queued', error: outcome.error, nextAttemptAt: next.nextAttemptAt }
          : { status: 'failed', error: `${outcome.error} (no more retries after ${mail.attempts} attempts)` };
    }
    const finished = await this.mails.finishClaim(mail.id, replicaId, changes);
    return { outcome: outcome.kind, status: finished ? changes.status : undefined };
  }

  /**
   * The approval or escalation mail for this attempt. A mail that may decide gets a fresh link and a
   * fresh Message-ID of Alcarta's own (random, at the mailbox's domain), both stored on the link: a
   * reply naming that Message-ID decides as the link would (ApprovalReplyService). An escalation to an
   * address that may not decide by mail leads to the console's page of the request instead.
   */
  private async requestMailOf(mail: ApprovalMailEntity): Promise<OutboundMessageFields> {
    const request = mail.request!;
    const [mailbox, names] = await Promise.all([
      this.mailboxes.getVisible(OPERATOR, request.mailboxId),
      this.credentials.namesOf([request.createdBy]),
    ]);
    const asker = names.get(request.createdBy) ?? null;
    const now = new Date();
    const decides = mail.kind !== 'escalation' || (await this.decidesByMail(request, mail.email));
    if (!decides) {
      const url = `${this.config.publicUrl}/console/requests/${request.id}`;
      return escalationMail(request, mailbox.address, asker, mail.email, { url, decides }, now);
    }
    const token = randomBytes(32).toString('base64url');
    const messageId = `<${randomBase62(24)}@${domainOf(mailbox.address)}>`;
    await this.links.insert({
      tokenHash: linkTokenHash(token),
      requestId: request.id,
      email: mail.email,
      expiresAt: request.expiresAt,
      messageId,
      usedAt: null,
    });
    const url = `${this.config.publicUrl}/console/links/${token}`;
    return mail.kind === 'escalation'
      ? escalationMail(request, mailbox.address, asker, mail.email, { url, decides, messageId }, now)
      : approvalMail(request, mailbox.address, asker, mail.email, url, messageId, now);
  }

  /**
   * Whether an escalation mail to `email` carries a link that decides: only to an address that is
   * mailed approval mail (the policy as it stands now); the others get the console's page of the request.
   */
  private async decidesByMail(request: ApprovalRequestEntity, email: string): Promise<boolean> {
    const policy = (await this.policies.find(request.mailboxId))?.policy;
    const recipients = policyRecipients(await this.approvers.list(request.mailboxId), policy);
    return recipients.some((r) => r.toLowerCase() === email.toLowerCase());
  }

  /** The answer to a reply that decided nothing: its note, in the reply's thread. */
  private async answerOf(mail: ApprovalMailEntity): Promise<OutboundMessageFields> {
    const request = mail.request!;
    const mailbox = await this.mailboxes.getVisible(OPERATOR, request.mailboxId);
    const messageId = `<${mail.id}@${domainOf(mailbox.address)}>`;
    return replyAnswerMail(
      request,
      mailbox.address,
      mail.email,
      mail.note ?? '',
      mail.inReplyTo,
      messageId,
      new Date(),
    );
  }
}

/** Who is mailed a new request: the mailbox's approvers list, as the policy (if any) narrows and widens it. */
function policyRecipients(listed: readonly string[], policy: ApprovalPolicy | undefined): string[] {
  if (!policy?.approvers) return [...listed];
  const named = policy.approvers.filter((a) => a.startsWith('email:')).map((a) => a.slice('email:'.length));
  return [...new Set([...listed.filter((e) => named.includes(e.toLowerCase())), ...named])];
}
