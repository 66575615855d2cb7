/**
 * Why `events/subscribe` or `events/unsubscribe` refused, in the extension's terms; the MCP layer
 * turns `kind` into the extension's error code (docs/agents.md, "Webhook delivery").
 * - `invalid_params`: the request cannot be right (arguments, URL, secret, cursor);
 * - `not_found`: no such event type for this caller, or no such subscription (`data.kind`);
 * - `unsupported`: webhook delivery is not offered here (no ALCARTA_SECRETS_KEY to keep secrets);
 * - `callback_failed`: the callback URL did not confirm (`data.reason`, a category only).
 */
export class SubscriptionRefusal extends Error {
  constructor(
    readonly kind: 'invalid_params' | 'not_found' | 'unsupported' | 'callback_failed',
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}
