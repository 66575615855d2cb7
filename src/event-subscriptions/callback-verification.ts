import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { SUBSCRIPTION_ID_HEADER } from '../webhooks/webhook-dispatch.service';
import { signedHeaders } from '../webhooks/webhook-events';
import { failureCategory, postWebhook, WEBHOOK_MAX_RESPONSE_BYTES, WEBHOOK_TIMEOUT_MS } from '../webhooks/webhook-http';
import { SubscriptionRefusal } from './subscription-refusal';

/**
 * The verification handshake of a callback URL (docs/agents.md, "Webhook delivery"): before the
 * first subscription of a caller delivers to a URL, Alcarta POSTs it a signed `verification`
 * envelope with a single-use challenge, through the same guarded client as every delivery, and
 * delivers only if the answer is a 2xx whose JSON body echoes the challenge. Without it, anyone could
 * point a flood of signed POSTs at somebody else's URL.
 */
@Injectable()
export class CallbackVerification {
  constructor(private readonly config: AppConfig) {}

  async verify(url: string, secret: string, subscriptionId: string): Promise<void> {
    const challenge = randomBytes(24).toString('base64url');
    const body = JSON.stringify({ type: 'verification', challenge });
    const webhookId = `msg_verification_${randomBytes(12).toString('hex')}`;
    const outcome = await postWebhook(
      url,
      body,
      { [SUBSCRIPTION_ID_HEADER]: subscriptionId, ...signedHeaders(webhookId, body, [secret], new Date()) },
      {
        allowedHosts: this.config.webhookAllowedHosts,
        timeoutMs: WEBHOOK_TIMEOUT_MS,
        maxResponseBytes: WEBHOOK_MAX_RESPONSE_BYTES,
        keepBody: true,
      },
    );
    if (outcome.kind === 'error') {
      if (outcome.refused)
        throw new SubscriptionRefusal('invalid_params', `delivery.url is refused: ${outcome.error}.`);
      throw callbackFailed(failureCategory({ status: null, error: outcome.error }));
    }
    if (outcome.status < 200 || outcome.status >= 300) {
      throw callbackFailed(failureCategory({ status: outcome.status, error: null }));
    }
    if (!echoes(outcome.body, challenge)) throw callbackFailed('challenge_failed');
  }
}

function callbackFailed(reason: string): SubscriptionRefusal {
  return new SubscriptionRefusal(
    'callback_failed',
    `The callback URL did not confirm the subscription (${reason}): it must answer the verification POST with a 2xx and {"challenge": "<the challenge it was sent>"}.`,
    { reason },
  );
}

/** Whether the answer is JSON whose `challenge` is the one sent (compared in constant time). */
function echoes(body: Buffer | undefined, challenge: string): boolean {
  let echoed: unknown;
  try {
    echoed = (JSON.parse(body?.toString('utf8') ?? '') as { challenge?: unknown }).challenge;
  } catch {
    return false;
  }
  if (typeof echoed !== 'string') return false;
  const expected = Buffer.from(challenge);
  const got = Buffer.from(echoed);
  return got.length === expected.length && timingSafeEqual(got, expected);
}
