import { Inject, Injectable } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/server';
import type { CallToolResult, JSONObject, ServerCapabilities, Tool } from '@modelcontextprotocol/server';
import { Caller } from '../../kernel/caller';
import { REVISION_2026_07_28_INSTRUCTIONS, SERVER_INFO } from '../server-identity';
import { progressNotifier } from '../progress';
import { ALL_REVISIONS, REVISION_2026_07_28 } from '../protocol-revision';
import { ToolCatalog } from '../tool-catalog';
import { ToolContext } from '../tool-definition';
import { clientCapabilities, Revision20260728Extension } from './extension';
import { REVISION_2026_07_28_EXTENSIONS, Revision20260728ToolCalls } from './tool-calls';

/**
 * How long a 2026-07-28 client may reuse these results (server/utilities/caching). Both are fixed
 * for a token: tools/list depends only on its scopes (which never change for a token) and on the
 * deployment, server/discover only on the deployment. Private: the list differs between tokens, and
 * a shared cache must not hand one token's list to another. Five minutes bounds how long a client
 * keeps a list from before an upgrade; one that calls a tool the server no longer has gets an error
 * and may re-fetch at once (the spec allows that before the TTL ends). Revoking a token needs no
 * TTL: every request is authenticated.
 */
const CACHE_HINTS = {
  'tools/list': { ttlMs: 300_000, cacheScope: 'private' },
  'server/discover': { ttlMs: 300_000, cacheScope: 'private' },
} as const;

/**
 * Builds the v2 SDK server for one 2026-07-28 request (stateless, like the older era): the same
 * tool catalog and wait engine as SDK 1.x serves to 2025-era clients, with the extensions this
 * deployment offers. The v2 SDK does the protocol: `server/discover`, the `_meta` envelope,
 * `resultType`, the header checks, `ttlMs`/`cacheScope`, the error codes of the revision.
 */
@Injectable()
export class Revision20260728ServerFactory {
  private readonly capabilities: ServerCapabilities;

  constructor(
    private readonly catalog: ToolCatalog,
    private readonly toolCalls: Revision20260728ToolCalls,
    @Inject(REVISION_2026_07_28_EXTENSIONS) private readonly extensions: Revision20260728Extension[],
  ) {
    const offered = extensions.filter((e) => e.enabled);
    this.capabilities = {
      tools: { listChanged: false },
      ...(offered.length > 0 && {
        extensions: Object.fromEntries(offered.map((e) => [e.id, e.settings as JSONObject])),
      }),
    };
  }

  create(caller: Caller): Server {
    const server = new Server(SERVER_INFO, {
      capabilities: this.capabilities,
      instructions: REVISION_2026_07_28_INSTRUCTIONS,
      // The v2 SDK lists only the 2026-era ones of these in server/discover and in -32022's `supported`
      // (["2026-07-28"]): the older revisions are reached through `initialize`, not through the
      // `_meta` envelope, so a 2026-07-28 client could not use them from there.
      supportedProtocolVersions: [...ALL_REVISIONS],
      cacheHints: CACHE_HINTS,
    });
    // The catalog's listing is plain JSON, typed with SDK 1.x's (looser) schema types.
    server.setRequestHandler('tools/list', () => ({ tools: this.catalog.list(caller, REVISION_2026_07_28) as Tool[] }));
    server.setRequestHandler('tools/call', (request, ctx): Promise<CallToolResult> => {
      const toolContext: ToolContext = {
        caller,
        revision: REVISION_2026_07_28,
        signal: ctx.mcpReq.signal,
        progress: progressNotifier(ctx.mcpReq._meta?.progressToken, (notification) => ctx.mcpReq.notify(notification)),
      };
      const { name, arguments: args } = request.params;
      // A CreateTaskResult (Tasks extension) is typed outside the SDK's tools/call vocabulary; the SDK
      // passes its `resultType: 'task'` through and adds `content: []` (a tools/call result must have it).
      return this.toolCalls.call(
        name,
        args,
        toolContext,
        clientCapabilities(ctx.mcpReq.envelope),
      ) as Promise<CallToolResult>;
    });
    for (const extension of this.extensions) if (extension.enabled) extension.register(server, caller);
    return server;
  }
}
