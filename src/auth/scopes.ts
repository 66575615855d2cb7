export const SCOPES = ['mail:read', 'mail:send', 'approvals:read', 'approvals:decide', 'mail:ingest', 'admin'] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** The Alcarta scopes among stored scope names (anything else is ignored). */
export function scopeSet(names: readonly string[]): Set<Scope> {
  return new Set<Scope>(names.filter(isScope));
}
