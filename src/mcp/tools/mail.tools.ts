import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { MailboxService } from '../../mail/mailbox.service';
import { MessageService } from '../../mail/message.service';
import { defineTool, ToolDefinition, ToolProvider } from '../tool-definition';

@Injectable()
export class MailTools implements ToolProvider {
  constructor(
    private readonly mailboxes: MailboxService,
    private readonly messages: MessageService,
  ) {}

  tools(): ToolDefinition[] {
    return [
      defineTool({
        name: 'list_mailboxes',
        title: 'List mailboxes',
        description:
          'Lists the mailboxes this token may use, with their ids and email addresses. Call this first to learn ' +
          'the mailbox_id that the other mail tools need.',
        input: z.object({}).strict(),
        scopes: [],
        annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
        handle: (_args, { caller }) => this.mailboxes.list(caller),
      }),
      defineTool({
        name: 'list_messages',
        title: 'List messages',
        description:
          'Lists messages of one mailbox (inbound and outbound) in mailbox order, oldest first, as summaries. ' +
          'Without since_cursor it starts at the beginning of the mailbox; pass the next_cursor of the previous ' +
          'call as since_cursor to continue exactly where you stopped: nothing is skipped or repeated. Store ' +
          'next_cursor before processing the page. Use get_message for the full text. To wait for new mail ' +
          'instead of calling this repeatedly, use email_await or monitor_inbox with the same cursor.',
        input: z
          .object({
            mailbox_id: z.string().min(1).describe('Mailbox id (mbx_…) from list_mailboxes.'),
            since_cursor: z
              .string()
              .optional()
              .describe('next_cursor of an earlier call; omit to start at the beginning.'),
            limit: z.number().int().min(1).max(100).default(20).describe('Page size, 1–100 (default 20).'),
          })
          .strict(),
        scopes: ['mail:read'],
        annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
        handle: (args, { caller }) => this.messages.list(caller, args.mailbox_id, args.since_cursor, args.limit),
      }),
      defineTool({
        name: 'get_message',
        title: 'Read a message',
        description:
          'Returns one whole message: addresses, subject, plain text, HTML (if any), Message-ID, the Message-ID ' +
          'it replies to, and its thread_id. The whole message is in structuredContent; for a large message ' +
          '(over 64 KiB) the text item is abridged: a note and the fields with text and html cut to their first ' +
          '2,000 characters.',
        input: z.object({ message_id: z.string().min(1).describe('Message id (msg_…).') }).strict(),
        scopes: ['mail:read'],
        annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
        handle: (args, { caller }) => this.messages.get(caller, args.message_id),
      }),
    ];
  }
}
