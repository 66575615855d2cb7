/**
 * The error vocabulary shared by the REST API and the MCP tools (docs/agents.md, "Tools";
 * docs/rest-api.md). Services throw these; the REST exception filter turns them into HTTP statuses
 * and the MCP layer into `isError` tool results, so a rule is written once and answers the same on
 * both surfaces.
 */
export type ErrorCode =
  | 'invalid_request'
  | 'not_found'
  | 'conflict'
  | 'limit_exceeded'
  | 'forbidden'
  | 'unauthorized'
  | 'unavailable'
  | 'identity_provider_unavailable';

export class AlcartaError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly reason: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'AlcartaError';
  }

  toBody(): Record<string, unknown> {
    return { error: this.code, reason: this.reason, message: this.message, ...this.details };
  }
}

export function invalidRequest(reason: string, message: string, details: Record<string, unknown> = {}): AlcartaError {
  return new AlcartaError('invalid_request', reason, message, details);
}

/** Unknown and invisible things answer alike, so ids of other tenants cannot be probed. */
export function notFound(
  kind: 'mailbox' | 'message' | 'request' | 'token' | 'wait' | 'grant' | 'webhook',
  id: string,
): AlcartaError {
  return new AlcartaError(
    'not_found',
    `${kind}_not_found`,
    `No ${kind} ${JSON.stringify(id)} is visible to this token.`,
    {
      id,
    },
  );
}

export function conflict(reason: string, message: string, details: Record<string, unknown> = {}): AlcartaError {
  return new AlcartaError('conflict', reason, message, details);
}

/**
 * JWTs cannot be checked because the identity provider's metadata or key set could not be fetched
 * (lately): the caller should retry after `retryAfterSeconds`, with the same token. Its own code, not
 * `unavailable`, because the cause lies outside this server and a client may tell its user so.
 */
export function identityProviderUnavailable(retryAfterSeconds: number): AlcartaError {
  return new AlcartaError(
    'identity_provider_unavailable',
    'identity_provider_unavailable',
    'The identity provider cannot be reached to check this access token; retry later.',
    { retry_after_seconds: retryAfterSeconds },
  );
}
