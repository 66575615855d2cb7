import { z } from 'zod';
import { TERMINAL_STATES } from '../approvals/approval-request.entity';
import { Caller } from '../kernel/caller';
import { EventFeedService, PageOptions } from './event-feed.service';

const mailboxId = z.string().min(1).optional().describe('Only this mailbox (mbx_…); omit for all your mailboxes.');

const emailReceivedArguments = z
  .object({
    mailbox_id: mailboxId,
    from: z.string().max(320).optional().describe('Only mail from this sender address (case-insensitive).'),
    subject_contains: z
      .string()
      .max(998)
      .optional()
      .describe('Only mail whose subject contains this (case-insensitive).'),
    from_verified: z.boolean().optional().describe('true: only mail whose From domain passed DMARC.'),
  })
  .strict();

const approvalDecidedArguments = z
  .object({
    mailbox_id: mailboxId,
    request_ids: z.array(z.string().min(1)).min(1).max(100).optional().describe('Only these requests (chk_…).'),
    states: z
      .array(z.enum(TERMINAL_STATES as ['approved', 'rejected', 'expired', 'cancelled']))
      .min(1)
      .optional()
      .describe('Only decisions ending in these states (default: approved, rejected, expired, cancelled).'),
  })
  .strict();

const approvalRequestedArguments = z
  .object({
    mailbox_id: mailboxId,
    request_ids: z.array(z.string().min(1)).min(1).max(100).optional().describe('Only these requests (chk_…).'),
  })
  .strict();

const AUTHENTICATION = {
  type: 'object',
  properties: { spf: { type: 'string' }, dkim: { type: 'string' }, dmarc: { type: 'string' }, arc: { type: 'string' } },
};

/**
 * The event types of the Events extension (docs/agents.md, "Events extension"), as `events/list`
 * shows them (payloads: the event fields of docs/agents.md, "Concepts", and docs/mail.md), each with
 * who may read it and the feed behind it. The one feed serves every delivery mode: a poll reads a
 * page of it, a webhook subscription's feeder reads the same pages (src/event-subscriptions).
 */
export const EVENT_TYPES = {
  'email.received': {
    description:
      'New inbound mail in your mailboxes. The cursor is the message cursor of list_messages and email_await ' +
      '(next_cursor / since_cursor), so a client can switch between them without skipping or repeating mail.',
    arguments: emailReceivedArguments,
    payloadSchema: {
      type: 'object',
      properties: {
        mailbox_id: { type: 'string' },
        message_id: { type: 'string' },
        from: { type: 'string' },
        subject: { type: 'string' },
        received_at: { type: 'string', format: 'date-time' },
        authentication: AUTHENTICATION,
        from_verified: { type: 'boolean' },
      },
      required: ['mailbox_id', 'message_id', 'from', 'subject', 'received_at'],
    },
    readable: (feeds: EventFeedService, caller: Caller) => feeds.readsMail(caller),
    poll: (feeds: EventFeedService, caller: Caller, args: unknown, page: PageOptions) =>
      feeds.messagesReceived(caller, args as z.output<typeof emailReceivedArguments>, page),
  },
  'approval.decided': {
    description:
      'A decision on one of your approval requests: approved or rejected by a person, expired, or cancelled.',
    arguments: approvalDecidedArguments,
    payloadSchema: {
      type: 'object',
      properties: {
        request_id: { type: 'string' },
        mailbox_id: { type: 'string' },
        state: { type: 'string', enum: [...TERMINAL_STATES] },
        previous_state: { type: ['string', 'null'] },
        changed_at: { type: 'string', format: 'date-time' },
      },
      required: ['request_id', 'mailbox_id', 'state', 'previous_state', 'changed_at'],
    },
    readable: (feeds: EventFeedService, caller: Caller) => feeds.readsDecisions(caller),
    poll: (feeds: EventFeedService, caller: Caller, args: unknown, page: PageOptions) =>
      feeds.requestsDecided(caller, args as z.output<typeof approvalDecidedArguments>, page),
  },
  'approval.requested': {
    description:
      'A new approval request in your mailboxes (the request_created event), to announce it where its approvers ' +
      'are. send_email requests carry their recipients and subject, never their body.',
    arguments: approvalRequestedArguments,
    payloadSchema: {
      type: 'object',
      properties: {
        request_id: { type: 'string' },
        mailbox_id: { type: 'string' },
        kind: { type: 'string', enum: ['approval', 'send_email'] },
        title: { type: 'string' },
        created_at: { type: 'string', format: 'date-time' },
        expires_at: { type: 'string', format: 'date-time' },
        to: { type: 'array', items: { type: 'string' } },
        cc: { type: 'array', items: { type: 'string' } },
        subject: { type: 'string' },
      },
      required: ['request_id', 'mailbox_id', 'kind', 'title', 'created_at', 'expires_at'],
    },
    readable: (feeds: EventFeedService, caller: Caller) => feeds.readsDecisions(caller),
    poll: (feeds: EventFeedService, caller: Caller, args: unknown, page: PageOptions) =>
      feeds.requestsCreated(caller, args as z.output<typeof approvalRequestedArguments>, page),
  },
} as const;
export type EventName = keyof typeof EVENT_TYPES;

/** The event type of that name, if there is one. */
export function eventType(name: string): (typeof EVENT_TYPES)[EventName] | undefined {
  return Object.hasOwn(EVENT_TYPES, name) ? EVENT_TYPES[name as EventName] : undefined;
}
