/** How long one metadata or JWKS request may take before it counts as failed. */
export const OAUTH_FETCH_TIMEOUT_MS = 5000;

/**
 * GETs a JSON document from the identity provider: redirects, any status but 2xx, a body that is
 * not JSON and no complete answer within OAUTH_FETCH_TIMEOUT_MS are failures.
 */
export async function fetchJson(url: URL | string): Promise<unknown> {
  const response = await fetch(url, {
    signal: AbortSignal.timeout(OAUTH_FETCH_TIMEOUT_MS),
    redirect: 'error',
    headers: { accept: 'application/json' },
  });
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`HTTP ${response.status}`);
  }
  return response.json();
}

/** What went wrong in a fetch, for the log: the error and, for a network error, its cause. */
export function fetchFailure(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}

/**
 * Finds the issuer's `jwks_uri`: RFC 8414 metadata first, then OpenID Connect discovery. The
 * metadata must name the same issuer (RFC 8414 §3.3), so a proxy or typo cannot swap key sets.
 */
export async function discoverJwksUri(issuer: string): Promise<URL> {
  const base = issuer.replace(/\/+$/, '');
  const candidates = [wellKnown(base, 'oauth-authorization-server'), `${base}/.well-known/openid-configuration`];
  const failures: string[] = [];
  for (const url of candidates) {
    try {
      const metadata = (await fetchJson(url)) as { issuer?: unknown; jwks_uri?: unknown } | null;
      if (metadata?.issuer !== issuer) {
        failures.push(`${url}: names issuer ${JSON.stringify(metadata?.issuer)}`);
        continue;
      }
      if (typeof metadata.jwks_uri !== 'string') {
        failures.push(`${url}: no jwks_uri`);
        continue;
      }
      return new URL(metadata.jwks_uri);
    } catch (err) {
      failures.push(`${url}: ${fetchFailure(err)}`);
    }
  }
  throw new Error(`No usable metadata for the OAuth issuer ${issuer} (${failures.join('; ')}).`);
}

/** RFC 8414 §3.1: the well-known segment goes between the host and the issuer's path. */
function wellKnown(issuer: string, name: string): string {
  const url = new URL(issuer);
  const path = url.pathname === '/' ? '' : url.pathname;
  return `${url.origin}/.well-known/${name}${path}`;
}
