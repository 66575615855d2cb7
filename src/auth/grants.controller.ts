import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { PathId } from '../http/validation';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { CreateGrantDto } from './dto/create-grant.dto';
import { GrantService } from './grant.service';

@Controller('v1/grants')
@RequireScopes('admin')
export class GrantsController {
  constructor(private readonly grants: GrantService) {}

  @Post()
  create(@CurrentCaller() caller: Caller, @Body() body: CreateGrantDto) {
    return this.grants.create(caller, { principal: body.principal, mailboxes: body.mailboxes });
  }

  @Get()
  list(@CurrentCaller() caller: Caller) {
    return this.grants.list(caller);
  }

  @Delete(':grant_id')
  @HttpCode(204)
  async revoke(
    @CurrentCaller() caller: Caller,
    @Param('grant_id', new PathId('grt', 'grant')) grantId: string,
  ): Promise<void> {
    await this.grants.revoke(caller, grantId);
  }
}
