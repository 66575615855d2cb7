import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { OutboundMessageFields } from './outbound-mail';
import type { AttemptOutcome } from './smtp-relay';

/** A way out for one mailbox's mail other than the shared relay: its connected account's own submission. */
export interface OutboundRoute {
  /** One delivery attempt, ended by `signal` (the outbox's attempt time limit). */
  send(message: OutboundMessageFields, signal: AbortSignal): Promise<AttemptOutcome>;
}

/** Lent by the connected-mailboxes module (the outbox does not depend on it). */
export interface OutboundRouteProvider {
  /** Whether the mailbox's mail leaves through a route of its own; inside `manager`'s transaction when given. */
  hasOwnRoute(mailboxId: string, manager?: EntityManager): Promise<boolean>;
  /** The mailbox's own route, or undefined for the shared relay. */
  routeFor(mailboxId: string): Promise<OutboundRoute | undefined>;
}

/**
 * Where each mailbox's approved mail leaves (docs/connected-mailboxes.md, "Sending"): a connected
 * mailbox with an `smtp` setting through its account's submission server, every other one through
 * ALCARTA_SMTP_RELAY_URL.
 */
@Injectable()
export class OutboundRoutes {
  private provider: OutboundRouteProvider | undefined;

  provide(provider: OutboundRouteProvider): void {
    this.provider = provider;
  }

  hasOwnRoute(mailboxId: string, manager?: EntityManager): Promise<boolean> {
    return this.provider ? this.provider.hasOwnRoute(mailboxId, manager) : Promise.resolve(false);
  }

  routeFor(mailboxId: string): Promise<OutboundRoute | undefined> {
    return this.provider ? this.provider.routeFor(mailboxId) : Promise.resolve(undefined);
  }
}
