import { AGENT_SCOPES } from './scopes';

/** The OAuth settings the discovery document and the bearer challenges depend on. */
export interface ResourceServerSettings {
  publicUrl: string;
  oauth: { issuer: string; scopePrefix: string } | undefined;
}

/** Which endpoint a 401 answers: /mcp, where agents connect, or the REST API. */
export type ChallengedEndpoint = 'mcp' | 'rest';

/** Where the metadata document of the /mcp resource lives (RFC 9728 section 3.1: path-suffixed). */
export function resourceMetadataUrl(publicUrl: string): string {
  return `${publicUrl}/.well-known/oauth-protected-resource/mcp`;
}

/** The agent scopes as the authorization server names them (with ALCARTA_OAUTH_SCOPE_PREFIX). */
function agentScopeNames(scopePrefix: string): string[] {
  return AGENT_SCOPES.map((scope) => `${scopePrefix}${scope}`);
}

/**
 * The RFC 9728 protected-resource metadata of Alcarta: the resource is the MCP endpoint (the RFC
 * 8707 audience tokens are issued for), and the scopes are the agent scopes only, named as the
 * authorization server knows them. MCP clients request whatever this lists, so listing
 * `approvals:decide` would hand every agent the power to approve its own requests, and a strict
 * authorization server would refuse those clients with `invalid_scope`. People who decide, ingest
 * or administer get their scopes through their own clients (the console's, an operator's).
 */
export function protectedResourceMetadata(
  publicUrl: string,
  oauth: { issuer: string; scopePrefix: string },
): Record<string, unknown> {
  return {
    resource: `${publicUrl}/mcp`,
    authorization_servers: [oauth.issuer],
    scopes_supported: agentScopeNames(oauth.scopePrefix),
    bearer_methods_supported: ['header'],
    resource_name: 'Alcarta',
  };
}

/**
 * The WWW-Authenticate challenge of a 401. Without OAuth it stays the bare realm; with OAuth it
 * points at the metadata document (so an MCP client can find the authorization server), a 401 of
 * /mcp names the agent scopes (clients that take the challenge's scope, as the MCP authorization
 * spec asks, then request exactly those), and it says `invalid_token` only when a token was sent —
 * a missing token gets no error attribute (RFC 6750 3.1).
 */
export function unauthorizedChallenge(
  settings: ResourceServerSettings,
  tokenSent: boolean,
  endpoint: ChallengedEndpoint,
): string {
  if (!settings.oauth) return 'Bearer realm="alcarta"';
  const parts = ['realm="alcarta"', `resource_metadata="${resourceMetadataUrl(settings.publicUrl)}"`];
  if (endpoint === 'mcp') parts.push(`scope="${agentScopeNames(settings.oauth.scopePrefix).join(' ')}"`);
  if (tokenSent) parts.push('error="invalid_token"');
  return `Bearer ${parts.join(', ')}`;
}

/**
 * The WWW-Authenticate challenge of a 403 for a missing scope (RFC 6750 3.1). It is sent with and
 * without OAuth: static tokens are bearer tokens too, and the scope list tells the client (or its
 * operator) what to ask for. Scope names carry the prefix the authorization server uses.
 */
export function insufficientScopeChallenge(settings: ResourceServerSettings, needed: readonly string[]): string {
  const prefix = settings.oauth?.scopePrefix ?? '';
  const scope = needed.map((name) => `${prefix}${name}`).join(' ');
  return `Bearer realm="alcarta", error="insufficient_scope", scope="${scope}"`;
}
