import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { WorkerDataSource } from '../database/worker-data-source';
import { AppendedEvent, EventLog } from '../events/event-log';
import { afterTemporaryFailure } from '../outbox/retry-policy';
import { SecretBox } from '../secrets/secret-box';
import { ClaimedWebhook, SettledWebhook, WebhookDeliveryRepository } from './webhook-delivery.repository';
import { WebhookEndpointEntity } from './webhook-endpoint.entity';
import { WebhookEndpointRepository } from './webhook-endpoint.repository';
import { isWebhookEventType } from './webhook-events';
import { WebhookHttpOutcome } from './webhook-http';

/** An endpoint whose every attempt failed for this long is disabled (docs/webhooks.md, "Retries"). */
export const DISABLE_AFTER_FAILING_MS = 3 * 24 * 3600_000;

/** What became of one attempt: also the label of the deliveries metric. */
export type WebhookOutcome = 'delivered' | 'retrying' | 'failed' | 'gone' | 'lost_claim';

/** A claimed delivery whose attempt has ended, as the worker hands it back to be recorded. */
export interface FinishedWebhook {
  delivery: ClaimedWebhook;
  outcome: WebhookHttpOutcome;
}

/** The attempt's error as recorded: none for a 2xx, `HTTP <status>` for other answers. */
function attemptError(outcome: WebhookHttpOutcome): string | null {
  if (outcome.kind === 'error') return outcome.error;
  return outcome.status >= 200 && outcome.status < 300 ? null : `HTTP ${outcome.status}`;
}

/** The last error of what a disabled endpoint had pending. */
function disabledError(reason: 'gone' | 'failing'): string {
  return `the endpoint was disabled (${reason})`;
}

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
  /**
   * Why it cannot be sent at all (its secret cannot be opened: sealed with a key this replica does
   * not have); recorded as a failed attempt, so that one such endpoint holds up no other delivery.
   */
  unsendable?: string;
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
    private readonly workerDataSource: WorkerDataSource,
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

  /** Claims due deliveries, with their endpoints' URLs and secrets (on the worker's own pool). */
  async claim(replicaId: string, leaseMs: number, limit: number): Promise<PreparedWebhook[]> {
    const { manager } = await this.workerDataSource.get();
    const claimed = await this.deliveries.claimDue(manager, replicaId, leaseMs, limit);
    if (claimed.length === 0) return [];
    const endpoints = new Map(
      (await this.endpoints.findByIds(manager, [...new Set(claimed.map((c) => c.endpointId))])).map((e) => [e.id, e]),
    );
    // An endpoint deleted since took its deliveries with it.
    return claimed.flatMap((delivery) => {
      const endpoint = endpoints.get(delivery.endpointId);
      if (!endpoint) return [];
      const prepared = { delivery, url: endpoint.url, ...request(delivery) };
      try {
        return [{ ...prepared, secrets: this.signingSecrets(endpoint) }];
      } catch (err) {
        return [{ ...prepared, secrets: [], unsendable: `not sent: ${(err as Error).message}` }];
      }
    });
  }

  async msUntilNextDue(): Promise<number | undefined> {
    return this.deliveries.msUntilNextDue((await this.workerDataSource.get()).manager);
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
   * Records a batch of finished attempts in one transaction (on the worker's own pool), each with
   * what follows, in the order they finished: any 2xx delivers; 410 disables the endpoint; anything
   * else is retried with backoff until 24 h after the event, unless the endpoint has been failing
   * for 3 days, which disables it. `lost_claim`: the lease lapsed and another replica took the
   * delivery. Returns each attempt's outcome, in the order given.
   */
  async recordOutcomes(replicaId: string, finished: readonly FinishedWebhook[]): Promise<WebhookOutcome[]> {
    if (finished.length === 0) return [];
    const dataSource = await this.workerDataSource.get();
    return dataSource.transaction(async (manager) => {
      const { attempts, now } = await this.deliveries.lockClaims(
        manager,
        finished.map((f) => f.delivery.id),
        replicaId,
      );
      const held = finished.filter((f) => attempts.has(f.delivery.id));
      const endpoints = new Map(
        (await this.endpoints.findManyForUpdate(manager, [...new Set(held.map((f) => f.delivery.endpointId))])).map(
          (e) => [e.id, { ...e }],
        ),
      );
      const failingBefore = new Map([...endpoints.values()].map((e) => [e.id, e.failingSince]));
      const settled: Array<{ endpointId: string; delivery: SettledWebhook }> = [];
      const outcomes = new Map<string, WebhookOutcome>();
      const disabled: Array<{ endpoint: WebhookEndpointEntity; reason: 'gone' | 'failing' }> = [];
      for (const { delivery, outcome } of held) {
        // The endpoint is locked, and a delivery's rows cascade from it: it is there.
        const endpoint = endpoints.get(delivery.endpointId)!;
        const decided = this.decide(delivery, outcome, attempts.get(delivery.id)!, endpoint, now);
        settled.push({ endpointId: endpoint.id, delivery: decided.settled });
        outcomes.set(delivery.id, decided.outcome);
        if (decided.disables) {
          disabled.push({ endpoint: { ...endpoint }, reason: decided.disables });
          Object.assign(endpoint, { enabled: false, disabledAt: now, disabledReason: decided.disables });
          // Disabling fails what the endpoint has retrying: the earlier attempts of this batch too.
          for (const earlier of settled) {
            if (earlier.endpointId === endpoint.id && earlier.delivery.status === 'retrying') {
              Object.assign(earlier.delivery, {
                status: 'failed',
                nextAttemptAt: null,
                lastError: disabledError(decided.disables),
              });
            }
          }
        }
      }
      await this.deliveries.recordAttempts(
        manager,
        held.map(({ delivery, outcome }) => ({
          deliveryId: delivery.id,
          n: attempts.get(delivery.id)!,
          at: now,
          statusCode: outcome.kind === 'response' ? outcome.status : null,
          error: attemptError(outcome),
          durationMs: Math.round(outcome.durationMs),
        })),
      );
      for (const endpoint of endpoints.values()) {
        if (endpoint.failingSince !== failingBefore.get(endpoint.id)) {
          await this.endpoints.update(manager, endpoint.id, { failingSince: endpoint.failingSince });
        }
      }
      for (const { endpoint, reason } of disabled) await this.disable(manager, endpoint, reason, now);
      await this.deliveries.settle(
        manager,
        settled.map((s) => s.delivery),
      );
      return finished.map((f) => outcomes.get(f.delivery.id) ?? 'lost_claim');
    });
  }

  /**
   * What one attempt leaves its delivery as, and whether it disables the endpoint. `endpoint` is the
   * endpoint as the batch has left it so far; its failing_since is updated here.
   */
  private decide(
    delivery: ClaimedWebhook,
    outcome: WebhookHttpOutcome,
    attempts: number,
    endpoint: WebhookEndpointEntity,
    now: Date,
  ): { settled: SettledWebhook; outcome: WebhookOutcome; disables?: 'gone' | 'failing' } {
    const error = attemptError(outcome);
    const finished = { id: delivery.id, nextAttemptAt: null, deliveredAt: null, lastError: error };
    if (error === null) {
      endpoint.failingSince = null;
      return { settled: { ...finished, status: 'delivered', deliveredAt: now }, outcome: 'delivered' };
    }
    // An Events-extension receiver that refuses a body as too large will refuse it again.
    if (outcome.kind === 'response' && outcome.status === 413 && delivery.kind !== 'event') {
      return { settled: { ...finished, status: 'failed' }, outcome: 'failed' };
    }
    if (outcome.kind === 'response' && outcome.status === 410) {
      return {
        settled: { ...finished, status: 'failed' },
        outcome: 'gone',
        ...(endpoint.enabled ? { disables: 'gone' as const } : {}),
      };
    }
    const failingSince = endpoint.failingSince ?? now;
    if (endpoint.enabled && now.getTime() - failingSince.getTime() >= DISABLE_AFTER_FAILING_MS) {
      return { settled: { ...finished, status: 'failed' }, outcome: 'failed', disables: 'failing' };
    }
    endpoint.failingSince = failingSince;
    const next = afterTemporaryFailure({ attempts, queuedAt: delivery.createdAt }, now, {
      baseMs: this.config.webhookRetryBaseMs,
      maxMs: this.config.webhookRetryMaxMs,
    });
    return next.status === 'retrying'
      ? { settled: { ...finished, status: 'retrying', nextAttemptAt: next.nextAttemptAt }, outcome: 'retrying' }
      : { settled: { ...finished, status: 'failed' }, outcome: 'failed' };
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
    await this.deliveries.failPending(manager, endpoint.id, disabledError(reason));
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
