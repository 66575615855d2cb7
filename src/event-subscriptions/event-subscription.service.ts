import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { clientFacingError } from '../database/database-errors';
import { Caller } from '../kernel/caller';
import { SecretBox } from '../secrets/secret-box';
import { EventFeedService, FeedPage } from '../waits/event-feed.service';
import { eventType, EVENT_TYPES, EventName } from '../waits/event-feed-types';
import { WebhookDeliveryRepository } from '../webhooks/webhook-delivery.repository';
import { newWebhookEndpoint, WebhookEndpointEntity } from '../webhooks/webhook-endpoint.entity';
import { WebhookEndpointRepository } from '../webhooks/webhook-endpoint.repository';
import { assertWebhookUrl, failureCategory } from '../webhooks/webhook-http';
import { CallbackVerification } from './callback-verification';
import { EventSubscriptionEntity } from './event-subscription.entity';
import { EventSubscriptionRepository, SubscriptionRecord } from './event-subscription.repository';
import { SubscriptionFeeder } from './subscription-feeder';
import { SubscriptionRefusal } from './subscription-refusal';
import { grantedExpiry, isSubscriptionSecret, REPLACED_SECRET_VALID_MS, subscriptionId } from './subscription-terms';

/** `events/subscribe` as the MCP layer hands it over (its shape checked, its meaning not yet). */
export interface SubscribeRequest {
  name: string;
  arguments: Record<string, unknown>;
  url: string;
  secret: string;
  /** Where delivery starts; null: now. */
  cursor: string | null;
  maxAgeMs?: number;
  /** The suggested lifetime; undefined: the default; null: no expiry. */
  ttlMs?: number | null;
}

/** The extension's `SubscribeEventsResult`. */
export interface SubscribeResult {
  id: string;
  refreshBefore: string | null;
  cursor: string;
  truncated: boolean;
  deliveryStatus?: DeliveryStatus;
}

export interface DeliveryStatus {
  active: boolean;
  lastDeliveryAt: string | null;
  lastError: string | null;
  failedSince?: string;
}

/**
 * Webhook subscriptions of the Events extension (docs/agents.md, "Webhook delivery"). A
 * subscription is keyed by who asks, the callback URL, the event type and its arguments; subscribing
 * again with the same key refreshes it (TTL, secret, reactivation). Its occurrences are read from the
 * same feeds as `events/poll` (SubscriptionFeeder) and delivered by the webhook engine, signed with
 * the client's own secret, from any replica, across restarts.
 */
@Injectable()
export class EventSubscriptionService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly subscriptions: EventSubscriptionRepository,
    private readonly endpoints: WebhookEndpointRepository,
    private readonly deliveries: WebhookDeliveryRepository,
    private readonly feeds: EventFeedService,
    private readonly verification: CallbackVerification,
    private readonly feeder: SubscriptionFeeder,
    private readonly box: SecretBox,
    private readonly config: AppConfig,
  ) {}

  /** Whether webhook delivery is offered at all: subscriptions' secrets are kept sealed. */
  get offered(): boolean {
    return this.box.available;
  }

  async subscribe(caller: Caller, request: SubscribeRequest): Promise<SubscribeResult> {
    const { name, args } = this.parse(caller, request.name, request.arguments);
    if (!this.offered) {
      throw new SubscriptionRefusal(
        'unsupported',
        'Webhook delivery is not offered by this server (it has no ALCARTA_SECRETS_KEY to keep secrets with); use events/poll.',
        { feature: 'deliveryMode', value: 'webhook' },
      );
    }
    this.checkUrl(request.url);
    if (!isSubscriptionSecret(request.secret)) {
      throw new SubscriptionRefusal(
        'invalid_params',
        'delivery.secret must be a Standard Webhooks secret: "whsec_" and the base64 of 24 to 64 random bytes.',
      );
    }
    const id = subscriptionId(caller.tokenId, request.url, name, args);
    // Reads one occurrence after the cursor: checks the cursor, and says whether maxAgeMs leaves some out.
    const probe = await this.readFeed(caller, name, args, request.cursor, request.maxAgeMs);
    const start = request.cursor ?? probe.cursor;
    const live = await this.subscriptions.isLive(this.dataSource.manager, id);
    if (!live && !(await this.subscriptions.verifiedUrl(caller.tokenId, request.url))) {
      await this.verification.verify(request.url, request.secret, id);
    }
    const result = await this.dataSource.transaction(async (manager) => {
      await this.subscriptions.lockKey(manager, id);
      const existing = await this.subscriptions.findForUpdate(manager, id);
      if (existing && (await this.subscriptions.isLive(manager, id))) {
        return this.refresh(manager, existing, request, start);
      }
      if (existing) await this.subscriptions.deleteStale(manager, id);
      return this.create(manager, caller, id, name, args, request, start, probe.truncated);
    });
    this.feeder.wake();
    return result;
  }

  async unsubscribe(caller: Caller, request: { name: string; arguments: Record<string, unknown>; url: string }) {
    const { name, args } = this.parse(caller, request.name, request.arguments);
    const id = subscriptionId(caller.tokenId, request.url, name, args);
    const deleted = await this.dataSource.transaction(async (manager) => {
      await this.subscriptions.lockKey(manager, id);
      return this.subscriptions.delete(manager, id, caller.tokenId);
    });
    if (!deleted) {
      throw new SubscriptionRefusal(
        'not_found',
        'No such subscription: none of yours has this name, arguments and delivery.url.',
        {
          kind: 'subscription',
        },
      );
    }
  }

  /** The event type (one this caller may read) and its arguments as parsed; refusals as the extension words them. */
  private parse(caller: Caller, name: string, raw: Record<string, unknown>): { name: EventName; args: unknown } {
    const type = eventType(name);
    // Like a tool the token's scopes do not allow: indistinguishable from one that does not exist.
    if (!type || !type.readable(this.feeds, caller)) {
      throw new SubscriptionRefusal('not_found', `No event type ${JSON.stringify(name)}; see events/list.`, {
        kind: 'event',
        name,
      });
    }
    const args = type.arguments.safeParse(raw);
    if (!args.success) {
      throw new SubscriptionRefusal('invalid_params', `Invalid arguments for ${name}: ${args.error.message}`);
    }
    return { name: name as EventName, args: args.data };
  }

  /** https only (the extension's rule: the secret and payloads must not travel in clear), and an allowed target. */
  private checkUrl(url: string): void {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new SubscriptionRefusal('invalid_params', 'delivery.url is not a valid absolute URL.');
    }
    if (parsed.protocol !== 'https:') {
      throw new SubscriptionRefusal('invalid_params', `delivery.url must be an https: URL, not ${parsed.protocol}.`);
    }
    try {
      assertWebhookUrl(url, this.config.webhookAllowedHosts);
    } catch (err) {
      throw new SubscriptionRefusal(
        'invalid_params',
        `delivery.${(err as Error).message.replace(/^The webhook URL/, 'url')}`,
      );
    }
  }

  private async readFeed(
    caller: Caller,
    name: EventName,
    args: unknown,
    cursor: string | null,
    maxAgeMs: number | undefined,
  ): Promise<FeedPage> {
    try {
      return await EVENT_TYPES[name].poll(this.feeds, caller, args, { cursor, maxEvents: 1, maxAgeMs });
    } catch (err) {
      const known = clientFacingError(err);
      if (known && ['invalid_request', 'not_found'].includes(known.code)) {
        throw new SubscriptionRefusal('invalid_params', known.message, { reason: known.reason });
      }
      throw err;
    }
  }

  private async create(
    manager: EntityManager,
    caller: Caller,
    id: string,
    name: EventName,
    args: unknown,
    request: SubscribeRequest,
    start: string,
    truncated: boolean,
  ): Promise<SubscribeResult> {
    const now = await databaseNow(manager);
    const expiresAt = grantedExpiry(request.ttlMs, now);
    const endpoint = newWebhookEndpoint({
      id,
      kind: 'events_subscription',
      url: request.url,
      events: [],
      mailboxIds: [],
      description: null,
      secretSealed: this.box.seal(request.secret),
      expiresAt,
      createdBy: caller.tokenId,
    });
    const subscription = Object.assign(new EventSubscriptionEntity(), {
      id,
      owner: caller.tokenId,
      url: request.url,
      name,
      arguments: args as Record<string, unknown>,
      feedCursor: start,
      pages: '0',
      replayFloor:
        request.cursor !== null && request.maxAgeMs !== undefined ? new Date(now.getTime() - request.maxAgeMs) : null,
      endedAt: null,
    });
    await this.subscriptions.insert(manager, endpoint, subscription);
    return { id, refreshBefore: expiresAt?.toISOString() ?? null, cursor: start, truncated };
  }

  /**
   * A refresh: a new lifetime, a new secret (the old one signs beside it for a while), and a
   * suspended subscription reactivated, resuming from the client's cursor. A live subscription's
   * position is its own: the cursor is not needed to continue.
   */
  private async refresh(
    manager: EntityManager,
    { subscription, endpoint }: SubscriptionRecord,
    request: SubscribeRequest,
    start: string,
  ): Promise<SubscribeResult> {
    const now = await databaseNow(manager);
    const expiresAt = grantedExpiry(request.ttlMs, now);
    const wasActive = endpoint.enabled;
    const secretChanged = this.box.open(endpoint.secretSealed) !== request.secret;
    await this.endpoints.update(manager, endpoint.id, {
      expiresAt,
      ...(secretChanged
        ? {
            secretSealed: this.box.seal(request.secret),
            previousSecretSealed: endpoint.secretSealed,
            previousSecretExpiresAt: new Date(now.getTime() + REPLACED_SECRET_VALID_MS),
          }
        : {}),
      ...(wasActive ? {} : { enabled: true, disabledAt: null, disabledReason: null, failingSince: null }),
    });
    if (!wasActive && request.cursor !== null) {
      await this.subscriptions.update(manager, subscription.id, { feedCursor: start });
    }
    await this.subscriptions.touch(manager, subscription.id);
    const pending = await this.deliveries.pendingFeedCursors([subscription.id]);
    const cursor = wasActive ? (pending.get(subscription.id) ?? subscription.feedCursor) : start;
    return {
      id: subscription.id,
      refreshBefore: expiresAt?.toISOString() ?? null,
      cursor,
      truncated: false,
      deliveryStatus: await this.deliveryStatus(endpoint, wasActive),
    };
  }

  /** How delivery has been going, in categories only (never what the endpoint answered). */
  private async deliveryStatus(endpoint: WebhookEndpointEntity, wasActive: boolean): Promise<DeliveryStatus> {
    const last = await this.deliveries.lastAttempts(endpoint.id);
    const failing = endpoint.failingSince !== null || !wasActive;
    return {
      active: wasActive,
      lastDeliveryAt: last.lastDeliveredAt?.toISOString() ?? null,
      lastError:
        failing && (last.lastError !== null || last.lastStatus !== null)
          ? failureCategory({ status: last.lastStatus, error: last.lastError })
          : null,
      ...(endpoint.failingSince ? { failedSince: endpoint.failingSince.toISOString() } : {}),
    };
  }
}

async function databaseNow(manager: EntityManager): Promise<Date> {
  const [{ now }] = await manager.query<Array<{ now: Date }>>(`SELECT now() AS now`);
  return now;
}
