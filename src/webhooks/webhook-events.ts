import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { EventType } from '../events/event.entity';

/**
 * The event types an endpoint can ask for (docs/webhooks.md, "Events"): adding one to the event log
 * and to this list is all it takes to deliver it.
 */
export const WEBHOOK_EVENT_TYPES = [
  'message_received',
  'request_created',
  'request_state_changed',
  'message_delivery_changed',
  'mailbox_source_changed',
] as const satisfies readonly EventType[];

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export function isWebhookEventType(type: string): type is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(type);
}

/**
 * A new signing secret in the form Standard Webhooks libraries take: `whsec_` and the base64 of the
 * key (24 random bytes, 192 bits).
 */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/**
 * The Standard Webhooks headers of one POST: the delivery's id (the same for every attempt), the
 * time in seconds, and one signature per secret, space-separated (during a rotation's overlap the
 * previous secret signs too, so receivers that still hold it keep verifying).
 */
export function signedHeaders(
  deliveryId: string,
  body: string,
  secrets: readonly string[],
  at: Date,
): Record<string, string> {
  const signatures = secrets.map((secret) => new Webhook(secret).sign(deliveryId, at, body));
  return {
    'webhook-id': deliveryId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': signatures.join(' '),
  };
}
