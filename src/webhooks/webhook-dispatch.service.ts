import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { AppendedEvent, EventLog } from '../events/event-log';
import { afterTemporaryFailure } from '../outbox/retry-policy';
import { SecretBox } from '../secrets/secret-box';
import { ClaimedWebhook, WebhookDeliveryRepository } from './webhook-delivery.repository';
import { WebhookEndpointEntity } from './webhook-endpoint.entity';
import { WebhookEndpointRepository } from './webhook-endpoint.repository';
import { isWebhookEventType } from './webhook-events';
import { WebhookHttpOutcome } from './webhook-http';

/** An endpoint whose every attempt failed for this long is disabled (docs/webhooks.md, "Retries"). */
export const DISABLE_AFTER_FAILING_MS = 3 * 24 * 3600_000;

/** What became of one attempt: also the label of the deliveries metric. */
export type WebhookOutcome = 'delivered' | 'retrying' | 'failed' | 'gone' | 'lost_claim';

/**
 * The header naming an Events-extension subscription on each of its deliveries, so that a receiver
 * picks the secret before it parses the body.
 */
export const SUBSCRIPTION_ID_HEADER = 'x-mcp-subscription-id';

/** A claimed delivery with what its POST needs: where, what, and the secrets that sign it. */
export interface PreparedWebhook {
  delivery: ClaimedWebhook;
  url: string;
  /** The current secret, then the previous one while it is still valid. */
  secrets: string[];
  /** The `webhook-id` of every attempt. */
  webhookId: string;
  body: string;
  /** Headers besides the signature's. */
  headers: Record<string, string>;
}

/**
 * The delivery side of webhooks: queues one delivery per matching endpoint in the transaction of
 * every event (through the event log's append hook), and records what each attempt came to.
 */
@Injectable()
export class WebhookDispatch implements OnModuleInit {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly events: EventLog,
    private readonly deliveries: WebhookDeliveryRepository,
    private readonly endpoints: WebhookEndpointRepository,
    private readonly box: SecretBox,
    private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.events.onAppended((manager, event) => this.queue(manager, event));
  }

  /** The doorbell rings on the event's commit, so some replica's worker claims the deliveries at once. */
  private async queue(manager: EntityManager, event: AppendedEvent): Promise<void> {
    if (!isWebhookEventType(event.type) || event.mailboxId === null) return;
    const queued = await this.deliveries.queueForEvent(manager, { ...event, mailboxId: event.mailboxId });
    if (queued > 0) await this.events.ringDoorbell(manager, { kind: 'webhooks' });
  }

  /** Claims due deliveries, with their endpoints' URLs and secrets. */
  async claim(replicaId: string, leaseMs: number, limit: number): Promise<PreparedWebhook[]> {
    const claimed = await this.deliveries.claimDue(replicaId, leaseMs, limit);
    if (claimed.length === 0) return [];
    const endpoints = new Map(
      (await this.endpoints.findByIds(this.dataSource.manager, [...new Set(claimed.map((c) => c.endpointId))])).map(
        (e) => [e.id, e],
      ),
    );
    // An endpoint deleted since took its deliveries with it.
    return claimed.flatMap((delivery) => {
      const endpoint = endpoints.get(delivery.endpointId);
      return endpoint
        ? [{ delivery, url: endpoint.url, secrets: this.signingSecrets(endpoint), ...request(delivery) }]
        : [];
    });
  }

  msUntilNextDue(): Promise<number | undefined> {
    return this.deliveries.msUntilNextDue();
  }

  private signingSecrets(endpoint: WebhookEndpointEntity): string[] {
    const secrets = [this.box.open(endpoint.secretSealed)];
    if (
      endpoint.previousSecretSealed &&
      endpoint.previousSecretExpiresAt &&
      endpoint.previousSecretExpiresAt > new Date()
    ) {
      secrets.push(this.box.open(endpoint.previousSecretSealed));
    }
    return secrets;
  }

  /**
   * Records an attempt and what follows: any 2xx delivers; 410 disables the endpoint; anything else
   * is retried with backoff until 24 h after the event, unless the endpoint has been failing for 3
   * days, which disables it. `lost_claim`: the lease lapsed and another replica took the delivery.
   */
  async recordOutcome(
    replicaId: string,
    delivery: ClaimedWebhook,
    outcome: WebhookHttpOutcome,
  ): Promise<WebhookOutcome> {
    return this.dataSource.transaction(async (manager) => {
      const claim = await this.deliveries.lockClaim(manager, delivery.id, replicaId);
      if (!claim) return 'lost_claim';
      const { now } = claim;
      const statusCode = outcome.kind === 'response' ? outcome.status : null;
      const error =
        outcome.kind === 'error'
          ? outcome.error
          : statusCode! >= 200 && statusCode! < 300
            ? null
            : `HTTP ${statusCode}`;
      await this.deliveries.recordAttempt(manager, {
        deliveryId: delivery.id,
        n: claim.delivery.attempts,
        at: now,
        statusCode,
        error,
        durationMs: Math.round(outcome.durationMs),
      });
      const released = { claimedBy: null, leaseExpiresAt: null };
      const endpoint = (await this.endpoints.findForUpdate(manager, delivery.endpointId))!;
      if (error === null) {
        await this.deliveries.update(manager, delivery.id, {
          ...released,
          status: 'delivered',
          deliveredAt: now,
          lastError: null,
        });
        if (endpoint.failingSince) await this.endpoints.update(manager, endpoint.id, { failingSince: null });
        return 'delivered';
      }
      // An Events-extension receiver that refuses a body as too large will refuse it again.
      if (statusCode === 413 && delivery.kind !== 'event') {
        await this.deliveries.update(manager, delivery.id, { ...released, status: 'failed', lastError: error });
        return 'failed';
      }
      if (statusCode === 410) {
        await this.deliveries.update(manager, delivery.id, { ...released, status: 'failed', lastError: error });
        await this.disable(manager, endpoint, 'gone', now);
        return 'gone';
      }
      const failingSince = endpoint.failingSince ?? now;
      if (endpoint.enabled && now.getTime() - failingSince.getTime() >= DISABLE_AFTER_FAILING_MS) {
        await this.deliveries.update(manager, delivery.id, { ...released, status: 'failed', lastError: error });
        await this.disable(manager, endpoint, 'failing', now);
        return 'failed';
      }
      if (!endpoint.failingSince) await this.endpoints.update(manager, endpoint.id, { failingSince: now });
      const next = afterTemporaryFailure({ attempts: claim.delivery.attempts, queuedAt: delivery.createdAt }, now, {
        baseMs: this.config.webhookRetryBaseMs,
        maxMs: this.config.webhookRetryMaxMs,
      });
      await this.deliveries.update(manager, delivery.id, {
        ...released,
        status: next.status,
        nextAttemptAt: next.status === 'retrying' ? next.nextAttemptAt : null,
        lastError: error,
      });
      return next.status;
    });
  }

  /** The endpoint gets nothing more (what it had queued fails) until a PATCH enables it again. */
  private async disable(
    manager: EntityManager,
    endpoint: WebhookEndpointEntity,
    reason: 'gone' | 'failing',
    now: Date,
  ): Promise<void> {
    if (!endpoint.enabled) return;
    await this.endpoints.update(manager, endpoint.id, { enabled: false, disabledAt: now, disabledReason: reason });
    await this.deliveries.failPending(manager, endpoint.id, `the endpoint was disabled (${reason})`);
    // An Events-extension subscription reports it to its client (deliveryStatus), not to the event log.
    if (endpoint.kind !== 'endpoint') return;
    await this.events.appendWebhookDisabledEvent(manager, {
      type: 'webhook_disabled',
      webhook_id: endpoint.id,
      mailbox_ids: endpoint.mailboxIds,
      reason,
      disabled_at: now.toISOString(),
    });
  }
}

/**
 * What a delivery POSTs: an event with its cursor under the delivery's id; an Events-extension
 * occurrence with the cursor safe to persist, under its eventId; a control envelope as queued; the
 * last two name their subscription (the endpoint's id).
 */
function request(delivery: ClaimedWebhook): Pick<PreparedWebhook, 'webhookId' | 'body' | 'headers'> {
  if (delivery.kind === 'event') {
    return { webhookId: delivery.id, body: JSON.stringify(delivery.payload), headers: {} };
  }
  const body = delivery.kind === 'occurrence' ? { ...delivery.payload, cursor: delivery.safeCursor } : delivery.payload;
  return {
    webhookId: delivery.messageId ?? delivery.id,
    body: JSON.stringify(body),
    headers: { [SUBSCRIPTION_ID_HEADER]: delivery.endpointId },
  };
}
