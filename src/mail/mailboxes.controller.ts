import { Body, Controller, Get, Post } from '@nestjs/common';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { CreateMailboxDto } from './dto/create-mailbox.dto';
import { MailboxService } from './mailbox.service';

@Controller('v1/mailboxes')
@RequireScopes('admin')
export class MailboxesController {
  constructor(private readonly mailboxes: MailboxService) {}

  @Post()
  create(@CurrentCaller() caller: Caller, @Body() body: CreateMailboxDto) {
    return this.mailboxes.create(caller, body.address, body.name ?? null);
  }

  @Get()
  list(@CurrentCaller() caller: Caller) {
    return this.mailboxes.list(caller);
  }
}
