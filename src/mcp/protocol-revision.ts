/**
 * The MCP revisions Alcarta serves with `initialize` (docs/agents.md, "Tools"), newest first:
 * `@modelcontextprotocol/sdk` 1.x.
 */
export const SUPPORTED_REVISIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export type LegacyRevision = (typeof SUPPORTED_REVISIONS)[number];

/**
 * MCP 2026-07-28 (docs/agents.md, "Protocol revisions"): stateless, no `initialize`, the revision
 * in each request's `_meta`. Served beside the revisions above by the v2 SDK
 * (`@modelcontextprotocol/server`), see src/mcp/revision-2026-07-28/.
 */
export const REVISION_2026_07_28 = '2026-07-28';
/** Every revision Alcarta serves, newest first (what `server/discover` lists). */
export const ALL_REVISIONS = [REVISION_2026_07_28, ...SUPPORTED_REVISIONS] as const;
export type ProtocolRevision = LegacyRevision | typeof REVISION_2026_07_28;

export const LATEST_REVISION: LegacyRevision = '2025-11-25';
/**
 * The first revision with MCP Tasks: before it, tools/call ignores `task` and tasks/* do not exist
 * (docs/agents.md, "Tasks").
 */
export const TASKS_REVISION: LegacyRevision = '2025-11-25';
/** What a request without an MCP-Protocol-Version header is taken to speak (MCP transport spec). */
export const DEFAULT_REVISION: LegacyRevision = '2025-03-26';

function isSupported(value: unknown): value is LegacyRevision {
  return (SUPPORTED_REVISIONS as readonly unknown[]).includes(value);
}

/**
 * The revision one stateless request is served at. `initialize` negotiates: the client's version
 * if supported, else the latest. Every other request names its revision in the header; an
 * unsupported header value yields undefined (the caller answers 400).
 */
export function revisionOf(body: unknown, header: string | string[] | undefined): LegacyRevision | undefined {
  const message = body as { method?: unknown; params?: { protocolVersion?: unknown } } | undefined;
  if (message && !Array.isArray(message) && message.method === 'initialize') {
    const requested = message.params?.protocolVersion;
    return isSupported(requested) ? requested : LATEST_REVISION;
  }
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return DEFAULT_REVISION;
  return isSupported(value) ? value : undefined;
}

/** The `_meta` key of a 2026-07-28 request that names its revision. */
const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';

/**
 * Whether a request belongs to the 2026-07-28 era: it says so in the MCP-Protocol-Version header,
 * claims a revision in its `_meta` (any value: the v2 SDK answers an unknown one with -32022 and
 * the list it supports), or is `server/discover`, which only that era has. Everything else,
 * `initialize` included, is served exactly as before by SDK 1.x. A cheap look at fields, not a
 * parse: the v2 SDK validates the whole request behind it.
 */
export function isRevision20260728Request(body: unknown, header: string | string[] | undefined): boolean {
  if ((Array.isArray(header) ? header[0] : header) === REVISION_2026_07_28) return true;
  if (!body || typeof body !== 'object' || Array.isArray(body)) return false;
  const message = body as { method?: unknown; params?: { _meta?: unknown } };
  if (message.method === 'initialize') return false;
  if (message.method === 'server/discover') return true;
  const meta = message.params?._meta;
  return !!meta && typeof meta === 'object' && PROTOCOL_VERSION_META_KEY in meta;
}
