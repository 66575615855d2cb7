import { WebhookAttemptEntity, WebhookDeliveryEntity } from './webhook-delivery.entity';
import { WebhookEndpointEntity } from './webhook-endpoint.entity';

/** An endpoint as the API shows it: never a secret, sealed or not. */
export function webhookView(e: WebhookEndpointEntity) {
  return {
    webhook_id: e.id,
    url: e.url,
    events: e.events,
    mailbox_ids: e.mailboxIds,
    description: e.description,
    enabled: e.enabled,
    disabled_at: e.disabledAt?.toISOString() ?? null,
    disabled_reason: e.disabledReason,
    failing_since: e.failingSince?.toISOString() ?? null,
    previous_secret_expires_at:
      e.previousSecretExpiresAt && e.previousSecretExpiresAt > new Date()
        ? e.previousSecretExpiresAt.toISOString()
        : null,
    created_at: e.createdAt.toISOString(),
    updated_at: e.updatedAt.toISOString(),
  };
}

export function deliveryView(d: WebhookDeliveryEntity, attempts: WebhookAttemptEntity[]) {
  return {
    delivery_id: d.id,
    event_type: d.eventType,
    cursor: d.eventId,
    mailbox_id: d.mailboxId,
    status: d.status,
    created_at: d.createdAt.toISOString(),
    delivered_at: d.deliveredAt?.toISOString() ?? null,
    next_attempt_at: d.nextAttemptAt?.toISOString() ?? null,
    last_error: d.lastError,
    attempts: attempts.map((a) => ({
      n: a.n,
      at: a.at.toISOString(),
      status_code: a.statusCode,
      error: a.error,
      duration_ms: a.durationMs,
    })),
  };
}
