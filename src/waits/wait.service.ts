import { Injectable } from '@nestjs/common';
import { RequestState, TERMINAL_STATES } from '../approvals/approval-request.entity';
import { Caller } from '../auth/caller';
import { Scope } from '../auth/scopes';
import { AlcartaError, invalidRequest, notFound } from '../common/errors';
import { AppConfig } from '../config/app-config';
import { MailboxService } from '../mail/mailbox.service';
import { MessageCursor } from '../mail/message-cursor';
import { WaitEngine } from './wait-engine';
import { MessageWaitSpec, RequestWaitSpec, WaitResult } from './wait-spec';

export type Delivery = 'poll' | 'websocket' | 'any';

/** `email_await` arguments after schema validation (the monitor_* tools map onto these). */
export interface AwaitArguments {
  event?:
    | { type: 'message_received'; mailbox_id?: string; from?: string; subject_contains?: string }
    | { type: 'request_state_changed'; request_ids: string[]; states?: RequestState[] };
  timeout_seconds: number;
  delivery: Delivery;
  since_cursor?: string;
  wait_id?: string;
}

/** The rules of SPEC §4 between a tool call and the engine: limits, scopes, visibility. */
@Injectable()
export class WaitService {
  constructor(
    private readonly engine: WaitEngine,
    private readonly mailboxes: MailboxService,
    private readonly config: AppConfig,
  ) {}

  async await(caller: Caller, args: AwaitArguments, signal?: AbortSignal): Promise<WaitResult> {
    if (args.wait_id !== undefined) throw notFound('wait', args.wait_id);
    if (!args.event) {
      throw invalidRequest('missing_argument', 'event is required (unless wait_id is given).', { argument: 'event' });
    }
    if (args.delivery !== 'poll') {
      throw invalidRequest('delivery_not_supported', `delivery "${args.delivery}" is not available; use "poll".`, {
        argument: 'delivery',
      });
    }
    const spec =
      args.event.type === 'message_received'
        ? await this.messageSpec(caller, args.event, args)
        : this.requestSpec(caller, args.event, args);
    return this.engine.wait(spec, signal);
  }

  private async messageSpec(
    caller: Caller,
    event: { mailbox_id?: string; from?: string; subject_contains?: string },
    args: AwaitArguments,
  ): Promise<MessageWaitSpec> {
    requireScope(caller, 'mail:read', 'message waits');
    const timeoutMs = this.timeout(args.timeout_seconds, this.config.maxMessageWaitSeconds);
    const since = args.since_cursor === undefined ? undefined : MessageCursor.parse(args.since_cursor);
    if (event.mailbox_id !== undefined) await this.mailboxes.getVisible(caller, event.mailbox_id);
    return {
      kind: 'message',
      caller,
      mailboxId: event.mailbox_id,
      since,
      from: normalise(event.from),
      subjectContains: normalise(event.subject_contains),
      timeoutMs,
    };
  }

  private requestSpec(
    caller: Caller,
    event: { request_ids: string[]; states?: RequestState[] },
    args: AwaitArguments,
  ): RequestWaitSpec {
    requireScope(caller, 'approvals:read', 'request waits');
    if (args.since_cursor !== undefined) {
      throw invalidRequest('since_cursor_not_allowed', 'since_cursor applies to message waits only.', {
        argument: 'since_cursor',
      });
    }
    return {
      kind: 'request',
      caller,
      requestIds: [...new Set(event.request_ids)],
      states: new Set(event.states ?? TERMINAL_STATES),
      timeoutMs: this.timeout(args.timeout_seconds, this.config.maxRequestWaitSeconds),
    };
  }

  /** Larger values are rejected, never clamped: a client must know how long it really waits. */
  private timeout(seconds: number, max: number): number {
    if (seconds > max) {
      throw invalidRequest('timeout_exceeds_limit', `timeout_seconds may be at most ${max} for this wait.`, {
        max_timeout_seconds: max,
      });
    }
    return seconds * 1000;
  }
}

function requireScope(caller: Caller, scope: Scope, what: string): void {
  if (!caller.hasScope(scope)) {
    throw new AlcartaError('invalid_request', 'missing_scope', `${what} need the ${scope} scope.`, {
      required_scopes: [scope],
    });
  }
}

function normalise(value: string | undefined): string | undefined {
  const trimmed = value?.trim().toLowerCase();
  return trimmed ? trimmed : undefined;
}
