export const SCOPES = ['mail:read', 'mail:send', 'approvals:read', 'approvals:decide', 'mail:ingest', 'admin'] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}
