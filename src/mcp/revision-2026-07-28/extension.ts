import type { MissingRequiredClientCapabilityErrorData, Server } from '@modelcontextprotocol/server';
import { Caller } from '../../kernel/caller';

/**
 * An MCP extension (SEP-2133) served at 2026-07-28: the entry it adds to the server's
 * `capabilities.extensions` (what `server/discover` shows), and its methods on the server built
 * for one request, bound to that request's caller.
 */
export interface Revision20260728Extension {
  /** The extension identifier, e.g. `io.modelcontextprotocol/tasks`. */
  readonly id: string;
  /** Its settings object in the capabilities; `{}` when it has none. */
  readonly settings: Record<string, unknown>;
  /** Whether this deployment offers it (a setting may switch it off). */
  readonly enabled: boolean;
  register(server: Server, caller: Caller): void;
  /**
   * Whether a `subscriptions/listen` filter asks for this extension's notifications without the
   * request declaring the extension (SEP-2663 wants -32021 then). Asked before the v2 SDK, whose
   * listen router serves `subscriptions/listen` itself and knows only the core filter fields.
   */
  listenNeedsDeclaration?(notifications: Record<string, unknown>): boolean;
}

/** The `io.modelcontextprotocol/clientCapabilities` a 2026-07-28 request carried in its `_meta`. */
export interface ClientCapabilities {
  extensions?: Record<string, unknown>;
  [key: string]: unknown;
}

const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';

/** The client capabilities of a request, from the envelope the v2 SDK lifted out of its `_meta`. */
export function clientCapabilities(envelope: object | undefined): ClientCapabilities {
  const value = (envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_KEY];
  return value && typeof value === 'object' ? (value as ClientCapabilities) : {};
}

/** Whether the request's client declared the extension `id` (in its per-request capabilities). */
export function declaresExtension(capabilities: ClientCapabilities, id: string): boolean {
  const extensions = capabilities.extensions;
  return !!extensions && typeof extensions === 'object' && id in extensions;
}

/** The -32021 error data naming the extension a request must declare. */
export function requiredExtension(id: string): MissingRequiredClientCapabilityErrorData {
  return { requiredCapabilities: { extensions: { [id]: {} } } };
}
