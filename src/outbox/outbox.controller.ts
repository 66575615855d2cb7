import { Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { PathId } from '../http/validation';
import { ListOutboxQuery } from './dto/list-outbox.query';
import { OutboxService } from './outbox.service';

/** Administrators look into the outbox and send failed mail again (docs/mail.md). */
@Controller('v1/outbox')
@RequireScopes('admin')
export class OutboxController {
  constructor(private readonly outbox: OutboxService) {}

  @Get()
  list(@CurrentCaller() caller: Caller, @Query() query: ListOutboxQuery) {
    return this.outbox.list(caller, query.status, query.limit ?? 100);
  }

  @Post(':message_id/retry')
  @HttpCode(200)
  retry(@CurrentCaller() caller: Caller, @Param('message_id', new PathId('msg', 'message')) messageId: string) {
    return this.outbox.retry(caller, messageId);
  }
}
