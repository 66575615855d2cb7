import { Controller, Delete, Get, Header, HttpCode, Post, Req, Res } from '@nestjs/common';
import { Request, Response } from 'express';
import { CurrentCaller, Public } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { jsonRpcError, SERVER_ERROR } from '../kernel/json-rpc';
import { McpEndpoint } from './mcp-endpoint.service';

const METHOD_NOT_ALLOWED = jsonRpcError(null, SERVER_ERROR, 'Method not allowed: this server is stateless; use POST.');

@Controller('mcp')
export class McpController {
  constructor(private readonly endpoint: McpEndpoint) {}

  @Post()
  async post(@CurrentCaller() caller: Caller, @Req() req: Request, @Res() res: Response): Promise<void> {
    await this.endpoint.handle(caller, req, res);
  }

  /** Stateless server: no standalone SSE stream to GET, no session to DELETE. */
  @Get()
  @Public()
  @HttpCode(405)
  @Header('Allow', 'POST')
  getNotAllowed() {
    return METHOD_NOT_ALLOWED;
  }

  /** A separate handler: stacked route decorators on one method keep only the last-applied one. */
  @Delete()
  @Public()
  @HttpCode(405)
  @Header('Allow', 'POST')
  deleteNotAllowed() {
    return METHOD_NOT_ALLOWED;
  }
}
