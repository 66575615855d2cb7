export const SCOPES = [
  'mail:read',
  'mail:send',
  'approvals:read',
  'approvals:decide',
  'mail:ingest',
  // Managing webhook endpoints of its mailboxes (docs/webhooks.md); never an agent's.
  'webhooks:manage',
  'admin',
] as const;

export type Scope = (typeof SCOPES)[number];

/**
 * What an agent needs, and all that Alcarta advertises to OAuth clients: standard MCP clients ask
 * the authorization server for every scope they are offered, and an agent must never hold the
 * scopes of the people who decide (`approvals:decide`), of mail ingestion or of administration.
 */
export const AGENT_SCOPES: readonly Scope[] = ['mail:read', 'mail:send', 'approvals:read'];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** The Alcarta scopes among stored scope names (anything else is ignored). */
export function scopeSet(names: readonly string[]): Set<Scope> {
  return new Set<Scope>(names.filter(isScope));
}
