import { Injectable, OnModuleInit } from '@nestjs/common';
import { MessageEntity } from '../mail/message.entity';
import { OutboxService } from '../outbox/outbox.service';
import { ApprovalRequestRepository } from './approval-request.repository';
import { contentSha256 } from './request-content';

/**
 * The outbox's last check before a message leaves: the message, read as the request's content, must
 * hash to what the person approved (`decided_content_sha256`). Anything else (a row changed after the
 * approval, a message that no approved request accounts for) fails the delivery with reason
 * `content_changed`, and nothing is sent.
 */
@Injectable()
export class ApprovedContentCheck implements OnModuleInit {
  constructor(
    private readonly outbox: OutboxService,
    private readonly requests: ApprovalRequestRepository,
  ) {}

  onModuleInit(): void {
    this.outbox.checkBeforeSend((message, requestId) => this.check(message, requestId));
  }

  private async check(message: MessageEntity, requestId: string | null) {
    const request = requestId === null ? null : await this.requests.findById(requestId);
    const leaving =
      request &&
      contentSha256({
        kind: request.kind,
        mailbox_id: message.mailboxId,
        from: message.from,
        to: message.to,
        cc: message.cc,
        subject: message.subject,
        text: message.text,
        html: message.html,
        in_reply_to: request.email?.in_reply_to_message_id ?? null,
        title: request.title,
        details: request.details,
      });
    if (
      request?.state === 'approved' &&
      request.sentMessageId === message.id &&
      leaving === request.decidedContentSha256
    ) {
      return undefined;
    }
    return {
      kind: 'refused' as const,
      reason: 'content_changed' as const,
      error: 'content_changed: the message is not the content a person approved, so it was not sent',
    };
  }
}
