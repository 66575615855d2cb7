/** The MCP revisions Alcarta speaks (SPEC §3), newest first. */
export const SUPPORTED_REVISIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export type ProtocolRevision = (typeof SUPPORTED_REVISIONS)[number];

export const LATEST_REVISION: ProtocolRevision = '2025-11-25';
/** The first revision with MCP Tasks: before it, tools/call ignores `task` and tasks/* do not exist (SPEC §5). */
export const TASKS_REVISION: ProtocolRevision = '2025-11-25';
/** What a request without an MCP-Protocol-Version header is taken to speak (MCP transport spec). */
export const DEFAULT_REVISION: ProtocolRevision = '2025-03-26';

function isSupported(value: unknown): value is ProtocolRevision {
  return (SUPPORTED_REVISIONS as readonly unknown[]).includes(value);
}

/**
 * The revision one stateless request is served at. `initialize` negotiates: the client's version
 * if supported, else the latest. Every other request names its revision in the header; an
 * unsupported header value yields undefined (the caller answers 400).
 */
export function revisionOf(body: unknown, header: string | string[] | undefined): ProtocolRevision | undefined {
  const message = body as { method?: unknown; params?: { protocolVersion?: unknown } } | undefined;
  if (message && !Array.isArray(message) && message.method === 'initialize') {
    const requested = message.params?.protocolVersion;
    return isSupported(requested) ? requested : LATEST_REVISION;
  }
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return DEFAULT_REVISION;
  return isSupported(value) ? value : undefined;
}
