/** What a webhook POST came to: the endpoint's answer, or why there was none. */
export type WebhookHttpOutcome =
  | { kind: 'response'; status: number; durationMs: number }
  /** `refused`: the target is not allowed (a private address, a redirect…); nothing was sent. */
  | { kind: 'error'; error: string; refused: boolean; durationMs: number };

/** The limits of one webhook POST (docs/webhooks.md, "Safe targets"). */
export interface WebhookHttpOptions {
  /** ALCARTA_WEBHOOK_ALLOWED_HOSTS: host names or addresses allowed although private. */
  allowedHosts: readonly string[];
  timeoutMs: number;
  maxResponseBytes: number;
}

/**
 * POSTs `body` to `url` with `headers`. Stub until the target guard lands: it follows no redirect,
 * stops after the timeout and reads at most `maxResponseBytes` of the answer.
 */
export async function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: WebhookHttpOptions,
): Promise<WebhookHttpOutcome> {
  const started = Date.now();
  try {
    const res = await fetch(url, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', ...headers },
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    await res.body?.cancel();
    return { kind: 'response', status: res.status, durationMs: Date.now() - started };
  } catch (err) {
    return { kind: 'error', error: (err as Error).message, refused: false, durationMs: Date.now() - started };
  }
}

/**
 * Checks a webhook URL when an endpoint is created or changed: http(s) only. Throws 400
 * `invalid_url`. Stub until the target guard lands.
 */
export function assertWebhookUrl(url: string): void {
  void url;
}
