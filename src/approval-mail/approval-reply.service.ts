import { Injectable, OnModuleInit } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { EventLog } from '../events/event-log';
import { AlcartaError } from '../kernel/errors';
import { InboundMessage } from '../mail/inbound-message';
import { MailHooks } from '../mail/mail-hooks';
import { MessageEntity } from '../mail/message.entity';
import { SmtpRelay } from '../outbox/smtp-relay';
import { ApprovalLinkEntity } from './approval-link.entity';
import { ApprovalLinksService, LinkRefusal } from './approval-links.service';
import { ApprovalMailRepository } from './approval-mail.repository';
import { ApprovalReplyEntity } from './approval-reply.entity';
import { ApprovalReplyRepository } from './approval-reply.repository';
import { parseReplyDecision } from './reply-decision';

/**
 * Answers to the replies of one approval mail (one link), at most: whoever knows its Message-ID
 * cannot make Alcarta mail an address over and over by replying many times.
 */
const MAX_ANSWERS_PER_LINK = 3;

/** What came of a reply: the request's state or why it decided nothing, and the answer to mail, if any. */
interface ReplyVerdict {
  outcome: string;
  note?: string;
}

/**
 * Deciding by reply (docs/policies.md, "Deciding by reply"). An approver may answer an approval mail with
 * "approve" or "reject" as the first word (reply-decision.ts). The mail module stores every inbound
 * message, by SMTP or from a connected mailbox, through one path whose hook this service joins:
 * a message whose In-Reply-To or References names the Message-ID of an approval mail (stored on its
 * link) is recorded in `approval_replies` in the same transaction, so a crash loses no reply. The
 * approval mail worker decides the recorded replies, in the same job as the mails.
 *
 * A reply decides only if its From is verified (`from_verified`: DMARC-aligned DKIM or SPF), is the
 * address the mail was sent to, and the link could still decide (ApprovalLinksService: unused,
 * unexpired, the request pending; then ApprovalService's separation of duties, policy and quorum).
 * Any other reply decides nothing and is answered once, through the approval mail queue, saying why.
 *
 * Against mail loops: a message that says a machine sent it (Auto-Submitted, Precedence, a delivery
 * report) is not even recorded; the answers say `Auto-Submitted: auto-replied`; each reply gets one
 * answer at most, and each approval mail MAX_ANSWERS_PER_LINK. The reply itself stays in the mailbox
 * as any message does: agents see it too.
 */
@Injectable()
export class ApprovalReplyService implements OnModuleInit {
  constructor(
    private readonly mailHooks: MailHooks,
    private readonly relay: SmtpRelay,
    private readonly replies: ApprovalReplyRepository,
    private readonly mails: ApprovalMailRepository,
    private readonly links: ApprovalLinksService,
    private readonly eventLog: EventLog,
  ) {}

  onModuleInit(): void {
    // Without a relay no approval mail was ever sent, and no answer could be.
    if (this.relay.configured)
      this.mailHooks.onInboundStored((manager, stored, parsed) => this.record(manager, stored, parsed));
  }

  /** In the storing transaction: records the message if it replies to an approval mail of its mailbox. */
  private async record(manager: EntityManager, stored: MessageEntity, parsed: InboundMessage): Promise<void> {
    if (parsed.automatic || parsed.deliveryReport) return;
    // In-Reply-To first, then References from the nearest ancestor back.
    const named = [...idsIn(stored.inReplyTo), ...[...stored.references].reverse().flatMap(idsIn)];
    if (named.length === 0) return;
    const links = await this.replies.linksByMessageId(manager, stored.mailboxId, [...new Set(named)]);
    const link = named.map((id) => links.find((l) => l.messageId === id)).find((l) => l !== undefined);
    if (!link) return;
    const said = parseReplyDecision(stored.text);
    await this.replies.insert(manager, {
      messageId: stored.id,
      tokenHash: link.tokenHash,
      sender: stored.from,
      fromVerified: stored.fromVerified,
      decision: said.decision,
      reason: said.decision ? said.reason : null,
      headerMessageId: stored.messageIdHeader,
    });
    await this.eventLog.ringDoorbell(manager, { kind: 'outbox', mailboxId: stored.mailboxId });
  }

  /**
   * Decides (or answers) one reply `replicaId` claimed and records the outcome while the claim
   * holds; the answer is queued in that same transaction, so it is queued once. Answers the outcome;
   * undefined when the claim was lost.
   */
  async process(replicaId: string, reply: ApprovalReplyEntity): Promise<string | undefined> {
    const verdict = await this.judge(reply, reply.link!);
    const answer =
      verdict.note !== undefined && (await this.replies.answeredFor(reply.tokenHash)) < MAX_ANSWERS_PER_LINK
        ? verdict.note
        : undefined;
    const finished = await this.replies.finishClaim(
      reply.messageId,
      replicaId,
      verdict.outcome,
      answer !== undefined,
      async (manager) => {
        if (answer === undefined) return;
        await this.queueAnswer(manager, reply, answer);
      },
    );
    return finished ? verdict.outcome : undefined;
  }

  private async judge(reply: ApprovalReplyEntity, link: ApprovalLinkEntity): Promise<ReplyVerdict> {
    const nothing = 'Your reply decided nothing:';
    if (!reply.fromVerified) {
      return {
        outcome: 'not_verified',
        note: `${nothing} it could not be verified as coming from ${reply.sender} (no DKIM signature or SPF pass aligned with its domain, as DMARC asks). Decide with the link in the approval mail instead.`,
      };
    }
    if (reply.sender.toLowerCase() !== link.email.toLowerCase()) {
      return {
        outcome: 'not_the_approver',
        note: `${nothing} the approval mail was sent to another address, and only a reply from that address counts.`,
      };
    }
    if (reply.decision === null) {
      return {
        outcome: 'unclear',
        note: `${nothing} its first word must be "approve" or "reject" (the rest of the reply is the reason). Reply again to the approval mail, or use its link.`,
      };
    }
    // A second attempt after a crash between deciding and recording it: the decision stands, unanswered.
    const request = link.request!;
    if (
      reply.attempts > 1 &&
      (request.decidedBy === link.email || request.approvals.some((a) => a.by === link.email))
    ) {
      return { outcome: request.state === 'pending' ? 'approval_recorded' : request.state };
    }
    try {
      const result = await this.links.decideByReply(link, reply.decision, reply.reason);
      if ('ok' in result)
        return { outcome: result.request.state === 'pending' ? 'approval_recorded' : result.request.state };
      return { outcome: result.kind, note: `${nothing} ${refusalText(result)}` };
    } catch (err) {
      // Any other refusal of the decision (content_changed) is the approver's to know, not a fault.
      if (!(err instanceof AlcartaError) || err.code === 'unavailable') throw err;
      return { outcome: err.reason, note: `${nothing} ${err.message}` };
    }
  }

  private async queueAnswer(manager: EntityManager, reply: ApprovalReplyEntity, note: string): Promise<void> {
    const request = reply.link!.request!;
    await this.mails.queue(manager, [
      {
        requestId: request.id,
        email: reply.sender,
        kind: 'reply_answer',
        note,
        inReplyTo: reply.headerMessageId,
      },
    ]);
    await this.eventLog.ringDoorbell(manager, { kind: 'outbox', mailboxId: request.mailboxId });
  }
}

/** The `<…>` Message-IDs in a header value (In-Reply-To may hold several, or text around them). */
function idsIn(value: string | null): string[] {
  return value?.match(/<[^<>\s]+>/g) ?? [];
}

/** Why a link refused, in a sentence for the person who replied. */
function refusalText(refusal: LinkRefusal): string {
  const by = (decidedBy: string | null) => (decidedBy ? ` by ${decidedBy}` : '');
  switch (refusal.kind) {
    case 'expired':
      return 'the request expired before your reply came.';
    case 'used':
    case 'decided':
      return refusal.state === 'pending'
        ? 'you have already decided this request; it waits for other approvers.'
        : `the request was already ${refusal.state}${by(refusal.decidedBy)}.`;
    case 'self_approval':
      return 'you cannot decide a request that you asked for yourself (separation of duties).';
    case 'not_an_approver':
      return "the mailbox's approval policy does not list you as an approver.";
    case 'already_approved':
      return 'you have already approved this request; it waits for other approvers.';
    case 'unknown':
      return 'the approval mail you answered is no longer known.';
  }
}
