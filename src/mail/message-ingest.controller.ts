import { Body, Controller, Param, Post, Req } from '@nestjs/common';
import { Request } from 'express';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { invalidRequest } from '../kernel/errors';
import { PathId, validateBody } from '../http/validation';
import { IngestMessageDto } from './dto/ingest-message.dto';
import { InboundMessage } from './inbound-message';
import { UNVERIFIED_SENDER } from './message-authentication';
import { MessageService } from './message.service';
import { parseRfc822 } from './rfc822-parser';
import { SenderAuthenticator } from './sender-authenticator';

/** Message-IDs compare with their angle brackets, however the sender wrote them. */
function normaliseMessageId(value: string | undefined): string | null {
  const trimmed = value?.trim();
  if (!trimmed) return null;
  return trimmed.startsWith('<') ? trimmed : `<${trimmed}>`;
}

@Controller('v1/mailboxes/:mailbox_id/messages')
@RequireScopes('mail:ingest')
export class MessageIngestController {
  constructor(
    private readonly messages: MessageService,
    private readonly authenticator: SenderAuthenticator,
  ) {}

  /** Body parsing for this route accepts JSON and `message/rfc822` (see http/body-parsers.ts). */
  @Post()
  async ingest(
    @CurrentCaller() caller: Caller,
    @Param('mailbox_id', new PathId('mbx', 'mailbox')) mailboxId: string,
    @Req() req: Request,
    @Body() body: unknown,
  ) {
    // `false` means a body of another type, which no parser read: name the real problem.
    if (req.is(['application/json', 'message/rfc822']) === false) {
      throw invalidRequest(
        'unsupported_content_type',
        'Send the message as application/json or as a raw RFC 5322 message with Content-Type: message/rfc822.',
      );
    }
    const raw = req.is('message/rfc822') ? (body as Buffer) : undefined;
    const message = raw ? await parseRfc822(raw) : fromJson(await validateBody(IngestMessageDto, body));
    // Raw mail carries its own evidence (DKIM, DMARC, ARC); SPF needs an SMTP client, which REST has
    // not. JSON carries none: nothing to check.
    const verdict = raw ? () => this.authenticator.verify(raw) : UNVERIFIED_SENDER;
    const { messageId, duplicate } = await this.messages.ingest(caller, mailboxId, message, verdict);
    return { message_id: messageId, duplicate };
  }
}

function fromJson(dto: IngestMessageDto): InboundMessage {
  return {
    from: dto.from,
    to: dto.to,
    cc: dto.cc ?? [],
    subject: dto.subject,
    text: dto.text,
    html: dto.html ?? null,
    messageIdHeader: normaliseMessageId(dto.message_id_header),
    inReplyTo: normaliseMessageId(dto.in_reply_to),
    references: [],
    receivedAt: dto.received_at ?? null,
  };
}
