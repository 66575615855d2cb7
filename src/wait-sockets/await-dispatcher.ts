import { Injectable } from '@nestjs/common';
import { Caller } from '../kernel/caller';
import { invalidRequest } from '../kernel/errors';
import { AppConfig } from '../config/app-config';
import { AwaitArguments, WaitService } from '../waits/wait.service';
import { WaitResult } from '../waits/wait-spec';
import { TicketService } from './ticket.service';
import { waitSocketUrl } from './wait-socket-url';

/** What `delivery: "websocket" | "any"` returns at once (docs/agents.md, "Waits"). */
export interface DetachedWaitDescriptor {
  delivery: 'websocket' | 'poll';
  wait_id: string;
  websocket_url?: string;
  connect_deadline?: string;
  expires_at: string;
}

/**
 * Routes one call of email_await (or a monitor_* tool) by its `delivery` argument: a blocking poll wait or a
 * `wait_id` long poll goes to the wait service; websocket and "any" delivery store the wait and
 * return at once, with a single-use websocket URL or — `"any"` on a deployment without websockets —
 * just the `wait_id` to poll.
 */
@Injectable()
export class AwaitDispatcher {
  constructor(
    private readonly waits: WaitService,
    private readonly tickets: TicketService,
    private readonly config: AppConfig,
  ) {}

  async await(
    caller: Caller,
    args: AwaitArguments,
    signal?: AbortSignal,
  ): Promise<WaitResult | DetachedWaitDescriptor> {
    if (args.wait_id !== undefined || args.delivery === 'poll') return this.waits.await(caller, args, signal);
    if (!this.config.websockets && args.delivery === 'websocket') {
      throw invalidRequest('websocket_unavailable', 'Websocket delivery is disabled on this deployment; use "poll".', {
        argument: 'delivery',
      });
    }
    const ticket = this.config.websockets ? this.tickets.issue() : undefined;
    const wait = await this.waits.persist(caller, args, ticket?.hash);
    if (!ticket) return { delivery: 'poll', wait_id: wait.id, expires_at: wait.expiresAt.toISOString() };
    return {
      delivery: 'websocket',
      wait_id: wait.id,
      websocket_url: waitSocketUrl(this.config.publicUrl, ticket.ticket),
      connect_deadline: wait.connectDeadline!.toISOString(),
      expires_at: wait.expiresAt.toISOString(),
    };
  }
}
