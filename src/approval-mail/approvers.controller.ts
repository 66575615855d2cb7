import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { ApproversService } from './approvers.service';
import { SetApproversDto } from './dto/set-approvers.dto';

@Controller('v1/mailboxes/:mailboxId/approvers')
@RequireScopes('admin')
export class ApproversController {
  constructor(private readonly approvers: ApproversService) {}

  @Get()
  get(@CurrentCaller() caller: Caller, @Param('mailboxId') mailboxId: string) {
    return this.approvers.get(caller, mailboxId);
  }

  @Put()
  replace(@CurrentCaller() caller: Caller, @Param('mailboxId') mailboxId: string, @Body() body: SetApproversDto) {
    return this.approvers.replace(caller, mailboxId, body.emails);
  }
}
