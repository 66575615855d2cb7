import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { PathId } from '../http/validation';
import { RequireScopes } from './auth.decorators';
import { CreateTokenDto } from './dto/create-token.dto';
import { TokenService } from './token.service';

@Controller('v1/tokens')
@RequireScopes('admin')
export class TokensController {
  constructor(private readonly tokens: TokenService) {}

  @Post()
  create(@Body() body: CreateTokenDto) {
    return this.tokens.create({
      name: body.name,
      scopes: body.scopes,
      mailboxes: body.mailboxes,
      expiresAt: body.expires_at ?? null,
    });
  }

  @Get()
  list() {
    return this.tokens.list();
  }

  @Delete(':token_id')
  @HttpCode(204)
  async revoke(@Param('token_id', new PathId('tok', 'token')) tokenId: string): Promise<void> {
    await this.tokens.revoke(tokenId);
  }
}
