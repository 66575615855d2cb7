import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { REQUEST_STATES, RequestState } from '../../approvals/approval-request.entity';
import { invalidRequest } from '../../kernel/errors';
import { DELIVERY_STATUSES, DeliveryStatus } from '../../outbox/outbound-delivery.entity';
import { AppConfig } from '../../config/app-config';
import { AwaitDispatcher } from '../../wait-sockets/await-dispatcher';
import { AwaitArguments } from '../../waits/wait.service';
import { TaskService } from '../../tasks/task.service';
import { withProgress } from '../progress';
import { defineTool, ToolContext, ToolDefinition, ToolProvider } from '../tool-definition';

const timeoutSeconds = z
  .number()
  .int()
  .min(0)
  .default(30)
  .describe(
    'How long to block, in whole seconds (default 30; 0 checks once). Most MCP clients give up on a request after ' +
      '60 s: keep this at 50 or less unless your client resets its timeout on progress notifications, or run the ' +
      'wait as a task. Message waits allow up to 300 s and request waits up to 14400 s by default; larger values ' +
      'are rejected.',
  );
const delivery = z
  .enum(['poll', 'websocket', 'any'])
  .default('poll')
  .describe(
    '"poll" (default): this call blocks until the result. "websocket": returns at once with a single-use ' +
      'websocket_url (open it before connect_deadline; it sends {"type":"ready"} then one {"type":"result",…}) ' +
      'and a wait_id; if the socket fails, call email_await {"wait_id"} instead. "any": websocket if available, ' +
      'else a wait_id to poll.',
  );
const sinceCursor = z
  .string()
  .optional()
  .describe('next_cursor of an earlier result or of list_messages: resume exactly after it.');
const states = z
  .array(z.enum(REQUEST_STATES))
  .min(1)
  .optional()
  .describe(
    'States to wait for (default: the terminal ones: approved, rejected, expired, cancelled; with delivery_states: ' +
      'rejected, expired, cancelled).',
  );

const DELIVERY_STATES_HELP =
  'Delivery statuses of approved send_email requests to wait for (queued, sending, sent, retrying, failed, ' +
  'bounced, not_configured): a request matches when its outbound mail is in one of them, or when the request is in ' +
  'one of states. Without states, states then defaults to rejected, expired, cancelled (no mail will ever be ' +
  'sent), so a wait for ["sent", "failed", "bounced"] also ends if the email is never approved.';
const deliveryStates = z.array(z.enum(DELIVERY_STATUSES)).min(1).optional().describe(DELIVERY_STATES_HELP);

const mailboxId = z.string().min(1).optional().describe('Mailbox to watch (mbx_…); omit for all your mailboxes.');
const from = z.string().max(320).optional().describe('Only mail from this sender address (case-insensitive).');
const subjectContains = z
  .string()
  .max(998)
  .optional()
  .describe('Only mail whose subject contains this (case-insensitive).');
const fromVerified = z
  .boolean()
  .optional()
  .describe(
    'true: only mail whose From address is verified (its domain passed DMARC: from_verified in the events); ' +
      'use it when you act on who the sender is. false or omitted: no such filter (unverified mail too).',
  );
const requestIds = z.array(z.string().min(1)).min(1).max(100);

/** Fields that belong to one kind of event only; the server checks the combination (awaitArguments). */
const MESSAGE_FIELDS = ['mailbox_id', 'from', 'subject_contains', 'from_verified'] as const;
const REQUEST_FIELDS = ['request_ids', 'states', 'delivery_states'] as const;

/**
 * One object for both kinds of wait, told apart by `type`. It is not a discriminated union on
 * purpose: no inputSchema may use oneOf/anyOf/allOf (docs/operators.md, "Limits and hardening"),
 * because some clients (LangChain's MCP adapters) merge the variants and then reject every call.
 */
const awaitEvent = z
  .object({
    type: z
      .enum(['message_received', 'request_state_changed'])
      .describe('"message_received": new inbound mail. "request_state_changed": a decision on approval requests.'),
    mailbox_id: mailboxId.describe('message_received only: mailbox to watch (mbx_…); omit for all your mailboxes.'),
    from: from.describe('message_received only: only mail from this sender address (case-insensitive).'),
    subject_contains: subjectContains.describe(
      'message_received only: only mail whose subject contains this (case-insensitive).',
    ),
    from_verified: fromVerified.describe(
      'message_received only: true = only mail whose From address is verified (DMARC pass: from_verified in the ' +
        'events); false or omitted = no such filter.',
    ),
    request_ids: requestIds
      .optional()
      .describe('request_state_changed only, required there: the requests to watch (chk_…), 1–100.'),
    states: states.describe(
      'request_state_changed only: states to wait for (default: approved, rejected, expired, cancelled; with ' +
        'delivery_states: rejected, expired, cancelled).',
    ),
    delivery_states: deliveryStates.describe(`request_state_changed only: ${DELIVERY_STATES_HELP}`),
  })
  .strict();
type AwaitEvent = z.output<typeof awaitEvent>;

const RESULT_HELP =
  'The result is {matched, timed_out, shutdown, events, next_cursor (message waits), requests (request waits: ' +
  "each listed request's state and, for an approved email, its delivery)}. " +
  'A timeout is a normal result (timed_out: true): call again. shutdown: true means this server is restarting: ' +
  'call again at once (another replica answers). For message waits, store next_cursor before processing the ' +
  'events and pass it back as since_cursor: nothing is skipped or repeated.';

@Injectable()
export class WaitTools implements ToolProvider {
  constructor(
    private readonly awaits: AwaitDispatcher,
    private readonly tasks: TaskService,
    private readonly config: AppConfig,
  ) {}

  tools(): ToolDefinition[] {
    return [
      defineTool({
        name: 'email_await',
        blocking: true,
        title: 'Wait for new mail or an approval decision',
        description:
          'Blocks until something you wait for happens, instead of polling. Message wait: ' +
          '{"type":"message_received","mailbox_id"?,"from"?,"subject_contains"?,"from_verified"?} returns the new inbound messages ' +
          'after since_cursor (without it: after the newest message at the start of the wait), as soon as at least ' +
          'one matches, up to 100. Request wait: {"type":"request_state_changed","request_ids":[…],"states"?,' +
          '"delivery_states"?} returns as soon as a listed request is in one of the states, or the email of an ' +
          'approved send_email request reaches one of the delivery_states (at once if it already is); e.g. ' +
          '"delivery_states":["sent","failed","bounced"] waits until the mail left or definitely did not. ' +
          RESULT_HELP,
        input: z
          .object({
            event: awaitEvent.optional(),
            timeout_seconds: timeoutSeconds,
            delivery,
            since_cursor: sinceCursor,
            wait_id: z
              .string()
              .min(1)
              .optional()
              .describe(
                'Long-poll a wait created with delivery websocket/any (wt_…): returns its result (the same the ' +
                  'socket delivers) once there is one; a poll that times out leaves the wait running.',
              ),
          })
          .strict(),
        scopes: ['mail:read', 'approvals:read'],
        annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
        handle: (args, ctx) => this.run(awaitArguments(args), ctx),
        task: (args, ctx, ttl) => this.tasks.start(ctx.caller, awaitArguments(args), ttl),
      }),
      defineTool({
        name: 'monitor_inbox',
        blocking: true,
        title: 'Wait for new mail',
        description:
          'Blocks until new inbound mail arrives in your mailboxes (or one mailbox), optionally only from a sender, ' +
          'with a subject containing some text, or with a verified From (from_verified: true); returns up to 100 new ' +
          'messages as events. Same as email_await with a message_received event. ' +
          RESULT_HELP,
        input: z
          .object({
            mailbox_id: mailboxId,
            since_cursor: sinceCursor,
            from,
            subject_contains: subjectContains,
            from_verified: fromVerified,
            timeout_seconds: timeoutSeconds,
            delivery,
          })
          .strict(),
        scopes: ['mail:read'],
        annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
        handle: (args, ctx) => this.run(inboxArguments(args), ctx),
        task: (args, ctx, ttl) => this.tasks.start(ctx.caller, inboxArguments(args), ttl),
      }),
      defineTool({
        name: 'monitor_approval',
        blocking: true,
        title: 'Wait for an approval decision',
        description:
          'Blocks until a person decides on your approval request(s) (approved, rejected) or they expire or are ' +
          'cancelled, or until they reach the given states, or until the email of an approved send_email request ' +
          'reaches one of delivery_states (e.g. ["sent","failed","bounced"]); returns at once if one already has. ' +
          'Give request_id or request_ids (1–100). Same as email_await with a request_state_changed event. ' +
          RESULT_HELP,
        input: z
          .object({
            request_id: z.string().min(1).optional().describe('The request to watch (chk_…).'),
            request_ids: requestIds.optional().describe('Requests to watch (chk_…), 1–100.'),
            states,
            delivery_states: deliveryStates,
            timeout_seconds: timeoutSeconds,
            delivery,
          })
          .strict(),
        scopes: ['approvals:read'],
        annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
        handle: (args, ctx) => this.run(approvalArguments(args), ctx),
        task: (args, ctx, ttl) => this.tasks.start(ctx.caller, approvalArguments(args), ttl),
      }),
    ];
  }

  /**
   * Blocks on the wait. While it blocks, a client that asked for progress (progressToken) gets a
   * notification every keep-alive interval, which resets SDK clients' request timers
   * (resetTimeoutOnProgress); the transport adds SSE comments for proxies either way.
   */
  private run(args: AwaitArguments, ctx: ToolContext): Promise<object> {
    return withProgress(ctx.progress, this.config.keepaliveMs, this.awaits.await(ctx.caller, args, ctx.signal));
  }
}

/** email_await's flat `event` as the wait it describes, with fields of the other kind refused. */
function awaitArguments(args: Omit<AwaitArguments, 'event'> & { event?: AwaitEvent }): AwaitArguments {
  const { event, ...rest } = args;
  if (!event) return rest;
  const [own, foreign] =
    event.type === 'message_received' ? [MESSAGE_FIELDS, REQUEST_FIELDS] : [REQUEST_FIELDS, MESSAGE_FIELDS];
  const misplaced = foreign.find((field) => event[field] !== undefined);
  if (misplaced) {
    throw invalidRequest(
      'conflicting_arguments',
      `event.${misplaced} applies to ${event.type === 'message_received' ? 'request_state_changed' : 'message_received'} events only; this event is ${event.type} (its fields: ${own.join(', ')}).`,
      { argument: `event.${misplaced}` },
    );
  }
  if (event.type === 'message_received') {
    return {
      ...rest,
      event: {
        type: event.type,
        mailbox_id: event.mailbox_id,
        from: event.from,
        subject_contains: event.subject_contains,
        from_verified: event.from_verified,
      },
    };
  }
  if (event.request_ids === undefined) {
    throw invalidRequest('missing_argument', 'event.request_ids is required for a request_state_changed event.', {
      argument: 'event.request_ids',
    });
  }
  return {
    ...rest,
    event: {
      type: event.type,
      request_ids: event.request_ids,
      states: event.states,
      delivery_states: event.delivery_states,
    },
  };
}

function inboxArguments(args: {
  mailbox_id?: string;
  since_cursor?: string;
  from?: string;
  subject_contains?: string;
  from_verified?: boolean;
  timeout_seconds: number;
  delivery: AwaitArguments['delivery'];
}): AwaitArguments {
  return {
    event: {
      type: 'message_received',
      mailbox_id: args.mailbox_id,
      from: args.from,
      subject_contains: args.subject_contains,
      from_verified: args.from_verified,
    },
    since_cursor: args.since_cursor,
    timeout_seconds: args.timeout_seconds,
    delivery: args.delivery,
  };
}

function approvalArguments(args: {
  request_id?: string;
  request_ids?: string[];
  states?: RequestState[];
  delivery_states?: DeliveryStatus[];
  timeout_seconds: number;
  delivery: AwaitArguments['delivery'];
}): AwaitArguments {
  if ((args.request_id === undefined) === (args.request_ids === undefined)) {
    throw invalidRequest(
      args.request_id === undefined ? 'missing_argument' : 'conflicting_arguments',
      'Give exactly one of request_id and request_ids.',
      { argument: 'request_id' },
    );
  }
  return {
    event: {
      type: 'request_state_changed',
      request_ids: args.request_ids ?? [args.request_id!],
      states: args.states,
      delivery_states: args.delivery_states,
    },
    timeout_seconds: args.timeout_seconds,
    delivery: args.delivery,
  };
}
