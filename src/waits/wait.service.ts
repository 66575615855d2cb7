import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { RequestState, TERMINAL_STATES } from '../approvals/approval-request.entity';
import { Caller } from '../kernel/caller';
import { CredentialRevocationHooks } from '../auth/credential-revocation';
import { Scope } from '../kernel/scopes';
import { AlcartaError, invalidRequest, notFound } from '../kernel/errors';
import { AppConfig } from '../config/app-config';
import { MailboxService } from '../mail/mailbox.service';
import { MessageCursor } from '../mail/message-cursor';
import { DeliveryStatus } from '../outbox/outbound-delivery.entity';
import { newId } from '../common/ids';
import { PersistedWaitEntity } from './persisted-wait.entity';
import { PersistedWaitRepository } from './persisted-wait.repository';
import { ResultWaitOptions, WaitEngine } from './wait-engine';
import { WaitRepository } from './wait.repository';
import { watchedRequest } from './waiters';
import {
  accessEndedError,
  isAccessEnded,
  MessageWaitSpec,
  RequestWaitSpec,
  toStoredSpec,
  WaitResult,
  WaitSpec,
} from './wait-spec';

export type Delivery = 'poll' | 'websocket' | 'any';

/** `email_await` arguments after schema validation (the monitor_* tools map onto these). */
export interface AwaitArguments {
  event?:
    | {
        type: 'message_received';
        mailbox_id?: string;
        from?: string;
        subject_contains?: string;
        from_verified?: boolean;
      }
    | {
        type: 'request_state_changed';
        request_ids: string[];
        states?: RequestState[];
        delivery_states?: DeliveryStatus[];
      };
  timeout_seconds: number;
  delivery: Delivery;
  since_cursor?: string;
  wait_id?: string;
  /** Message waits: at most this many events (1–MAX_EVENTS); no tool takes it, `events/poll` pages do. */
  max_events?: number;
}

/**
 * The states `states` defaults to when a request wait gives `delivery_states` alone: the terminal
 * states in which no mail will ever be sent, so a wait for `sent` does not hang on a rejection.
 */
const UNSENDABLE_STATES: readonly RequestState[] = ['rejected', 'expired', 'cancelled'];

/** The rules of waits (docs/agents.md, "Waits") between a tool call and the engine: limits, scopes, visibility. */
@Injectable()
export class WaitService {
  constructor(
    private readonly engine: WaitEngine,
    private readonly mailboxes: MailboxService,
    private readonly waits: WaitRepository,
    private readonly persisted: PersistedWaitRepository,
    private readonly config: AppConfig,
    revocationHooks: CredentialRevocationHooks,
  ) {
    // A token that loses its access loses its stored waits with it: they end without a result.
    revocationHooks.register({
      revoke: (manager, tokenId, reason) => this.persisted.endForToken(manager, tokenId, reason),
      revokeLapsed: (manager) => this.persisted.endForLapsedTokens(manager),
    });
  }

  /**
   * A blocking call of email_await (or a monitor_* tool): a poll wait, or a long poll of a
   * persisted wait by `wait_id`. Websocket and "any" delivery start with `persist` instead (the
   * delivery module issues their ticket and URL).
   */
  async await(caller: Caller, args: AwaitArguments, signal?: AbortSignal): Promise<WaitResult> {
    if (args.wait_id !== undefined) return this.awaitPersisted(caller, args, signal);
    if (args.delivery !== 'poll') throw new Error(`delivery "${args.delivery}" is not a blocking wait`);
    return this.engine.wait(await this.spec(caller, args), signal);
  }

  /**
   * Validates and stores a wait for websocket delivery or `wait_id` polls (every replica then
   * watches it). `ticketHash` is the hash of its single-use websocket ticket, if it has one.
   */
  async persist(caller: Caller, args: AwaitArguments, ticketHash: string | undefined): Promise<PersistedWaitEntity> {
    return this.store(caller, await this.spec(caller, args), ticketHash);
  }

  /**
   * The wait behind an MCP task: validated like any wait, stored without a ticket, watched by
   * every replica. `alongside` writes the task row in the same transaction.
   */
  async persistForTask(
    caller: Caller,
    args: AwaitArguments,
    alongside: (manager: EntityManager, wait: Omit<PersistedWaitEntity, 'createdAt'>) => Promise<void>,
  ): Promise<void> {
    if (args.wait_id !== undefined) {
      throw invalidRequest(
        'wait_id_not_supported_with_task',
        'A task starts a new wait; poll wait_id without a task.',
        {
          argument: 'wait_id',
        },
      );
    }
    if (args.delivery !== 'poll') {
      throw invalidRequest(
        'delivery_not_supported_with_task',
        'A task delivers its result through tasks/result; use delivery "poll".',
        {
          argument: 'delivery',
        },
      );
    }
    const spec = await this.spec(caller, args);
    await this.store(caller, spec, undefined, alongside);
  }

  private async spec(caller: Caller, args: AwaitArguments): Promise<WaitSpec> {
    if (!args.event) {
      throw invalidRequest('missing_argument', 'event is required (unless wait_id is given).', { argument: 'event' });
    }
    return args.event.type === 'message_received'
      ? this.messageSpec(caller, args.event, args)
      : this.requestSpec(caller, args.event, args);
  }

  private async store(
    caller: Caller,
    spec: WaitSpec,
    ticketHash: string | undefined,
    alongside?: (manager: EntityManager, wait: Omit<PersistedWaitEntity, 'createdAt'>) => Promise<void>,
  ): Promise<PersistedWaitEntity> {
    if (spec.kind === 'request') await this.assertRequestsVisible(spec);
    const start = spec.kind === 'message' ? await this.engine.startCursor(spec) : undefined;
    const now = Date.now();
    const wait: Omit<PersistedWaitEntity, 'createdAt'> = {
      id: newId('wt'),
      tokenId: caller.tokenId,
      kind: spec.kind,
      spec: toStoredSpec(spec, start),
      status: 'pending',
      result: null,
      expiresAt: new Date(now + spec.timeoutMs),
      resolvedAt: null,
      ticketHash: ticketHash ?? null,
      connectDeadline: ticketHash ? new Date(now + this.config.wsConnectTtlMs) : null,
      ticketConsumedAt: null,
    };
    return this.persisted.insert(wait, alongside && ((manager) => alongside(manager, wait)));
  }

  /**
   * Long-polls a persisted wait: its fixed result once there is one (the same the websocket
   * delivers); a poll that times out or meets a shutdown leaves the wait itself running
   * (`wait_status: "pending"`), so the client polls again.
   */
  private async awaitPersisted(caller: Caller, args: AwaitArguments, signal?: AbortSignal): Promise<WaitResult> {
    if (args.event !== undefined || args.since_cursor !== undefined || args.delivery !== 'poll') {
      throw invalidRequest('conflicting_arguments', 'With wait_id, give only timeout_seconds.', {
        argument: 'wait_id',
      });
    }
    const wait = await this.persisted.findForToken(args.wait_id!, caller.tokenId);
    if (!wait) throw notFound('wait', args.wait_id!);
    const timeoutMs = this.timeout(
      args.timeout_seconds,
      wait.kind === 'message' ? this.config.maxMessageWaitSeconds : this.config.maxRequestWaitSeconds,
    );
    if (wait.status === 'resolved') {
      // Ended by a revocation that committed after this request was authenticated.
      if (isAccessEnded(wait.result!)) throw accessEndedError(wait.result.reason);
      return wait.result!;
    }
    return this.awaitResult(wait, { credential: caller, delivery: 'poll', timeoutMs, signal });
  }

  /**
   * Waits for the fixed result of a persisted wait: for a `wait_id` poll, a websocket, or
   * `tasks/result`. When this wait for it ends first (its timeout, the caller going away, a
   * shutdown), the answer is the wait as it stands, pending, with `timed_out` or `shutdown` set:
   * the persisted wait itself goes on. Throws `unauthorized` when its token loses its access.
   */
  async awaitResult(
    wait: PersistedWaitEntity,
    options: Omit<ResultWaitOptions, 'timedOut' | 'shutdown'>,
  ): Promise<WaitResult> {
    const pending = await this.pendingResult(wait);
    return this.engine.awaitResult(wait, {
      ...options,
      timedOut: () => ({ ...pending, timed_out: true }),
      shutdown: () => ({ ...pending, shutdown: true }),
    });
  }

  /** What a client learns from a persisted wait that has no result yet. */
  private async pendingResult(wait: PersistedWaitEntity): Promise<WaitResult & { wait_status: 'pending' }> {
    const base = { matched: false, timed_out: false, shutdown: false, events: [], wait_status: 'pending' as const };
    if (wait.spec.kind === 'message') return { ...base, next_cursor: wait.spec.cursor };
    const rows = await this.waits.requests(wait.spec.request_ids, { all: true });
    return { ...base, requests: rows.map(watchedRequest) };
  }

  private async assertRequestsVisible(spec: RequestWaitSpec): Promise<void> {
    const visible = await this.waits.requests(spec.requestIds, spec.caller.mailboxAccess);
    const missing = spec.requestIds.find((id) => !visible.some((r) => r.id === id));
    if (missing) throw notFound('request', missing);
  }

  private async messageSpec(
    caller: Caller,
    event: { mailbox_id?: string; from?: string; subject_contains?: string; from_verified?: boolean },
    args: AwaitArguments,
  ): Promise<MessageWaitSpec> {
    requireScope(caller, 'mail:read', 'message waits');
    const timeoutMs = this.timeout(args.timeout_seconds, this.config.maxMessageWaitSeconds);
    const since = args.since_cursor === undefined ? undefined : MessageCursor.parse(args.since_cursor);
    if (event.mailbox_id !== undefined) {
      // Without since_cursor, the wait's start read (WaitEngine.startCursor) reads this mailbox
      // anyway and reports it missing: only the caller's scope is checked here, without a statement.
      if (since) await this.mailboxes.getVisible(caller, event.mailbox_id);
      else if (!caller.canSeeMailbox(event.mailbox_id)) throw notFound('mailbox', event.mailbox_id);
    }
    return {
      kind: 'message',
      caller,
      mailboxId: event.mailbox_id,
      since,
      from: normalise(event.from),
      subjectContains: normalise(event.subject_contains),
      fromVerifiedOnly: event.from_verified === true,
      timeoutMs,
      maxEvents: args.max_events,
    };
  }

  private requestSpec(
    caller: Caller,
    event: { request_ids: string[]; states?: RequestState[]; delivery_states?: DeliveryStatus[] },
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
      states: new Set(event.states ?? (event.delivery_states ? UNSENDABLE_STATES : TERMINAL_STATES)),
      deliveryStates: new Set(event.delivery_states),
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
