import { Body, Controller, Get, Param, Patch, Post } from '@nestjs/common';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { PathId } from '../http/validation';
import { CreateMailboxDto } from './dto/create-mailbox.dto';
import { UpdateMailboxDto } from './dto/update-mailbox.dto';
import { MailboxService } from './mailbox.service';

@Controller('v1/mailboxes')
@RequireScopes('admin')
export class MailboxesController {
  constructor(private readonly mailboxes: MailboxService) {}

  @Post()
  create(@CurrentCaller() caller: Caller, @Body() body: CreateMailboxDto) {
    return this.mailboxes.create(caller, body.address, body.name ?? null, body.source);
  }

  @Get()
  list(@CurrentCaller() caller: Caller) {
    return this.mailboxes.list(caller);
  }

  @Get(':mailbox_id')
  get(@CurrentCaller() caller: Caller, @Param('mailbox_id', new PathId('mbx', 'mailbox')) mailboxId: string) {
    return this.mailboxes.get(caller, mailboxId);
  }

  @Patch(':mailbox_id')
  update(
    @CurrentCaller() caller: Caller,
    @Param('mailbox_id', new PathId('mbx', 'mailbox')) mailboxId: string,
    @Body() body: UpdateMailboxDto,
  ) {
    return this.mailboxes.update(caller, mailboxId, { name: body.name, source: body.source });
  }
}
