import { Controller, Get, Header, HttpCode, Options } from '@nestjs/common';
import { AlcartaError } from '../kernel/errors';
import { AppConfig } from '../config/app-config';
import { Public } from '../kernel/route-decorators';
import { protectedResourceMetadata } from '../kernel/protected-resource-metadata';

/**
 * RFC 9728 discovery: where MCP clients learn which authorization server issues tokens for Alcarta.
 * Served at the root and at the /mcp-suffixed path (the one the 401 challenge names). Any origin may
 * read it: browser-based MCP clients fetch it cross-origin, and it holds nothing secret. The MCP SDK
 * sends an MCP-Protocol-Version header with it, so browsers preflight: the OPTIONS answer allows that.
 */
@Controller('.well-known/oauth-protected-resource')
@Public()
export class ProtectedResourceController {
  constructor(private readonly config: AppConfig) {}

  @Get()
  @Header('Access-Control-Allow-Origin', '*')
  root(): Record<string, unknown> {
    return this.document();
  }

  @Get('mcp')
  @Header('Access-Control-Allow-Origin', '*')
  mcp(): Record<string, unknown> {
    return this.document();
  }

  @Options()
  @HttpCode(204)
  @Header('Access-Control-Allow-Origin', '*')
  @Header('Access-Control-Allow-Methods', 'GET')
  @Header('Access-Control-Allow-Headers', 'mcp-protocol-version')
  @Header('Access-Control-Max-Age', '600')
  rootPreflight(): void {}

  /** A separate handler: stacked route decorators on one method keep only the last-applied one. */
  @Options('mcp')
  @HttpCode(204)
  @Header('Access-Control-Allow-Origin', '*')
  @Header('Access-Control-Allow-Methods', 'GET')
  @Header('Access-Control-Allow-Headers', 'mcp-protocol-version')
  @Header('Access-Control-Max-Age', '600')
  mcpPreflight(): void {}

  private document(): Record<string, unknown> {
    if (!this.config.oauth) {
      throw new AlcartaError('not_found', 'oauth_not_configured', 'OAuth is not configured on this server.');
    }
    return protectedResourceMetadata(this.config.publicUrl, this.config.oauth);
  }
}
