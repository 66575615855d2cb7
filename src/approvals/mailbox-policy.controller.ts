import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { PathId } from '../http/validation';
import { SetPolicyDto } from './dto/set-policy.dto';
import { MailboxPolicyService } from './mailbox-policy.service';

/** A mailbox's approval policy (docs/policies.md): read and replaced whole by an admin. */
@Controller('v1/mailboxes/:mailbox_id/policy')
@RequireScopes('admin')
export class MailboxPolicyController {
  constructor(private readonly policies: MailboxPolicyService) {}

  @Get()
  get(@CurrentCaller() caller: Caller, @Param('mailbox_id', new PathId('mbx', 'mailbox')) mailboxId: string) {
    return this.policies.get(caller, mailboxId);
  }

  @Put()
  put(
    @CurrentCaller() caller: Caller,
    @Param('mailbox_id', new PathId('mbx', 'mailbox')) mailboxId: string,
    @Body() body: SetPolicyDto,
  ) {
    return this.policies.put(caller, mailboxId, body);
  }
}
