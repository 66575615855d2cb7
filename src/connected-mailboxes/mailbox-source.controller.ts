import { Controller, HttpCode, Param, Post } from '@nestjs/common';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { PathId } from '../http/validation';
import { MailboxSourceService } from './mailbox-source.service';

@Controller('v1/mailboxes/:mailbox_id/source')
@RequireScopes('admin')
export class MailboxSourceController {
  constructor(private readonly sources: MailboxSourceService) {}

  /** Connects and signs in to the mailbox's account as the sync would, and changes nothing. */
  @Post('test')
  @HttpCode(200)
  test(@CurrentCaller() caller: Caller, @Param('mailbox_id', new PathId('mbx', 'mailbox')) mailboxId: string) {
    return this.sources.test(caller, mailboxId);
  }
}
