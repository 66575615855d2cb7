import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { PathId } from '../http/validation';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { CreateTokenDto } from './dto/create-token.dto';
import { TokenService } from './token.service';

@Controller('v1/tokens')
@RequireScopes('admin')
export class TokensController {
  constructor(private readonly tokens: TokenService) {}

  @Post()
  create(@CurrentCaller() caller: Caller, @Body() body: CreateTokenDto) {
    return this.tokens.create(caller, {
      name: body.name,
      scopes: body.scopes,
      mailboxes: body.mailboxes,
      expiresAt: body.expires_at ?? null,
    });
  }

  @Get()
  list(@CurrentCaller() caller: Caller) {
    return this.tokens.list(caller);
  }

  @Delete(':token_id')
  @HttpCode(204)
  async revoke(
    @CurrentCaller() caller: Caller,
    @Param('token_id', new PathId('tok', 'token')) tokenId: string,
  ): Promise<void> {
    await this.tokens.revoke(caller, tokenId);
  }
}
