import { Injectable } from '@nestjs/common';
import { MissingRequiredClientCapabilityError, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { Server } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { TERMINAL_STATES } from '../../approvals/approval-request.entity';
import { Caller } from '../../kernel/caller';
import { AppConfig } from '../../config/app-config';
import { clientFacingError } from '../../database/database-errors';
import { EventFeedService, FeedPage, MAX_FEED_PAGE, PageOptions } from '../../waits/event-feed.service';
import { protocolErrorOf } from '../../kernel/json-rpc';
import { clientCapabilities, declaresExtension, Revision20260728Extension } from './extension';

/**
 * The identifier of the MCP Events extension (SEP-3415; incubated by the Triggers & Events working
 * group in modelcontextprotocol/experimental-ext-triggers-events, whose design sketch this follows).
 */
export const EVENTS_EXTENSION_ID = 'io.modelcontextprotocol/events';

/** `-32011 NotFound` of the extension: an event type this server does not offer (to this caller). */
const NOT_FOUND = -32011;

/** How soon a client that got everything should poll again (the extension's `nextPollMs`). */
const NEXT_POLL_MS = 5_000;

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
 * The event types, as `events/list` shows them (payloads: the event fields of docs/agents.md,
 * "Concepts", and docs/mail.md).
 */
const EVENT_TYPES = {
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
type EventName = keyof typeof EVENT_TYPES;

const listParams = z.looseObject({ cursor: z.string().optional() });
const pollParams = z.looseObject({
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()).optional(),
  cursor: z.string().nullable().optional(),
  maxAgeMs: z.number().int().min(0).optional(),
  maxEvents: z.number().int().min(1).optional(),
});
const anyResult = z.looseObject({});

/**
 * The experimental Events extension at 2026-07-28 (docs/agents.md, "Protocol revisions"), poll
 * delivery only: `events/list` names the event types this caller may read, `events/poll` returns
 * one page of one of them after a cursor. Push (`events/stream`) and webhooks (`events/subscribe`)
 * are not offered; their methods answer -32601. A client must declare the extension in its
 * per-request capabilities.
 */
@Injectable()
export class EventsExtension implements Revision20260728Extension {
  readonly id = EVENTS_EXTENSION_ID;
  readonly settings = {};
  readonly enabled: boolean;

  constructor(
    private readonly feeds: EventFeedService,
    config: AppConfig,
  ) {
    this.enabled = config.eventsExtension;
  }

  register(server: Server, caller: Caller): void {
    server.setRequestHandler('events/list', { params: listParams, result: anyResult }, (params, ctx) => {
      requireDeclared(ctx.mcpReq.envelope);
      // Every event type fits on one page: a cursor is never issued, so none is valid.
      if (params.cursor !== undefined) throw invalidParams('events/list issues no cursor; call it without one.');
      return {
        events: (Object.keys(EVENT_TYPES) as EventName[])
          .filter((name) => EVENT_TYPES[name].readable(this.feeds, caller))
          .map((name) => describe(name)),
      };
    });
    server.setRequestHandler('events/poll', { params: pollParams, result: anyResult }, async (params, ctx) => {
      requireDeclared(ctx.mcpReq.envelope);
      const type = params.name in EVENT_TYPES ? EVENT_TYPES[params.name as EventName] : undefined;
      // Like a tool the token's scopes do not allow: indistinguishable from one that does not exist.
      if (!type || !type.readable(this.feeds, caller)) {
        throw new ProtocolError(NOT_FOUND, `No event type ${JSON.stringify(params.name)}; see events/list.`, {
          kind: 'event',
          name: params.name,
        });
      }
      const args = type.arguments.safeParse(params.arguments ?? {});
      if (!args.success) throw invalidParams(`Invalid arguments for ${params.name}: ${z.prettifyError(args.error)}`);
      const page: PageOptions = {
        cursor: params.cursor ?? null,
        maxEvents: Math.min(params.maxEvents ?? MAX_FEED_PAGE, MAX_FEED_PAGE),
        maxAgeMs: params.maxAgeMs,
      };
      return shape(params.name, await answered(type.poll(this.feeds, caller, args.data, page)));
    });
  }
}

function describe(name: EventName) {
  const type = EVENT_TYPES[name];
  const { $schema: _dialect, ...inputSchema } = z.toJSONSchema(type.arguments, { io: 'input' });
  return { name, description: type.description, delivery: ['poll'], inputSchema, payloadSchema: type.payloadSchema };
}

/** The extension's `PollEventsResult`. */
function shape(name: string, page: FeedPage) {
  return {
    events: page.events.map((e) => ({ eventId: e.id, name, timestamp: e.timestamp, data: e.data })),
    cursor: page.cursor,
    truncated: page.truncated,
    hasMore: page.hasMore,
    nextPollMs: NEXT_POLL_MS,
  };
}

/** The extension is offered to clients that ask for it (SEP-2133: the other side may fall back). */
function requireDeclared(envelope: object | undefined): void {
  if (!declaresExtension(clientCapabilities(envelope), EVENTS_EXTENSION_ID)) {
    throw new MissingRequiredClientCapabilityError(
      { requiredCapabilities: { extensions: { [EVENTS_EXTENSION_ID]: {} } } },
      `Declare the ${EVENTS_EXTENSION_ID} extension in the request's client capabilities to use it.`,
    );
  }
}

/**
 * Errors a caller can fix (a bad cursor, an invisible mailbox) are -32602 with Alcarta's error body;
 * an unreachable database is -32000 with it (protocolErrorOf).
 */
async function answered(page: Promise<FeedPage>): Promise<FeedPage> {
  try {
    return await page;
  } catch (err) {
    const known = clientFacingError(err);
    if (known && ['invalid_request', 'not_found', 'limit_exceeded', 'unavailable'].includes(known.code)) {
      const { code, message, data } = protocolErrorOf(known);
      throw new ProtocolError(code, message, data);
    }
    throw err;
  }
}

function invalidParams(message: string, data?: Record<string, unknown>): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, message, data);
}
