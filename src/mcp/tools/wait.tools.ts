import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { REQUEST_STATES, RequestState } from '../../approvals/approval-request.entity';
import { invalidRequest } from '../../common/errors';
import { AppConfig } from '../../config/app-config';
import { AwaitArguments, WaitService } from '../../waits/wait.service';
import { TaskService } from '../../tasks/task.service';
import { withProgress } from '../progress';
import { defineTool, ToolContext, ToolDefinition, ToolProvider } from '../tool-definition';

const timeoutSeconds = z
  .number()
  .int()
  .min(0)
  .default(30)
  .describe(
    'How long to block, in whole seconds (default 30, below the 60 s request timeout of common MCP clients; 0 checks ' +
      'once). Message waits allow up to 300 s and request waits up to 14400 s by default; larger values are rejected.',
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
  .describe('States to wait for (default: the terminal ones: approved, rejected, expired, cancelled).');

const messageEvent = z
  .object({
    type: z.literal('message_received'),
    mailbox_id: z.string().min(1).optional().describe('Mailbox to watch (mbx_…); omit for all your mailboxes.'),
    from: z.string().max(320).optional().describe('Only mail from this sender address (case-insensitive).'),
    subject_contains: z
      .string()
      .max(998)
      .optional()
      .describe('Only mail whose subject contains this (case-insensitive).'),
  })
  .strict();
const requestEvent = z
  .object({
    type: z.literal('request_state_changed'),
    request_ids: z.array(z.string().min(1)).min(1).max(100).describe('Requests to watch (chk_…), 1–100.'),
    states,
  })
  .strict();

const RESULT_HELP =
  'The result is {matched, timed_out, shutdown, events, next_cursor (message waits), requests (request waits)}. ' +
  'A timeout is a normal result (timed_out: true): call again. shutdown: true means this server is restarting: ' +
  'call again at once (another replica answers). For message waits, store next_cursor before processing the ' +
  'events and pass it back as since_cursor: nothing is skipped or repeated.';

@Injectable()
export class WaitTools implements ToolProvider {
  constructor(
    private readonly waits: WaitService,
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
          '{"type":"message_received","mailbox_id"?,"from"?,"subject_contains"?} returns the new inbound messages ' +
          'after since_cursor (without it: after the newest message at the start of the wait), as soon as at least ' +
          'one matches, up to 100. Request wait: {"type":"request_state_changed","request_ids":[…],"states"?} ' +
          'returns as soon as a listed request is in one of the states (at once if it already is). ' +
          RESULT_HELP,
        input: z
          .object({
            event: z.discriminatedUnion('type', [messageEvent, requestEvent]).optional(),
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
        handle: (args, ctx) => this.run(args, ctx),
        task: (args, ctx, ttl) => this.tasks.start(ctx.caller, args, ttl),
      }),
      defineTool({
        name: 'monitor_inbox',
        blocking: true,
        title: 'Wait for new mail',
        description:
          'Blocks until new inbound mail arrives in your mailboxes (or one mailbox), optionally only from a sender or ' +
          'with a subject containing some text; returns up to 100 new messages as events. Same as email_await with a ' +
          'message_received event. ' +
          RESULT_HELP,
        input: z
          .object({
            mailbox_id: messageEvent.shape.mailbox_id,
            since_cursor: sinceCursor,
            from: messageEvent.shape.from,
            subject_contains: messageEvent.shape.subject_contains,
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
          'cancelled, or until they reach the given states; returns at once if one already has. Give request_id or ' +
          'request_ids (1–100). Same as email_await with a request_state_changed event. ' +
          RESULT_HELP,
        input: z
          .object({
            request_id: z.string().min(1).optional().describe('The request to watch (chk_…).'),
            request_ids: requestEvent.shape.request_ids.optional(),
            states,
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
    return withProgress(ctx.progress, this.config.keepaliveMs, this.waits.await(ctx.caller, args, ctx.signal));
  }
}

function inboxArguments(args: {
  mailbox_id?: string;
  since_cursor?: string;
  from?: string;
  subject_contains?: string;
  timeout_seconds: number;
  delivery: AwaitArguments['delivery'];
}): AwaitArguments {
  return {
    event: {
      type: 'message_received',
      mailbox_id: args.mailbox_id,
      from: args.from,
      subject_contains: args.subject_contains,
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
    event: { type: 'request_state_changed', request_ids: args.request_ids ?? [args.request_id!], states: args.states },
    timeout_seconds: args.timeout_seconds,
    delivery: args.delivery,
  };
}
