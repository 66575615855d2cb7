import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { PathId } from '../http/validation';
import { ApprovalService } from './approval.service';
import { DecideRequestDto } from './dto/decide-request.dto';
import { ListRequestsQuery } from './dto/list-requests.query';

/** The human side of approvals: list what waits for a decision, approve or reject it. */
@Controller('v1/requests')
@RequireScopes('approvals:decide')
export class RequestsController {
  constructor(private readonly approvals: ApprovalService) {}

  @Get()
  list(@CurrentCaller() caller: Caller, @Query() query: ListRequestsQuery) {
    return this.approvals.list(caller, { state: query.state, mailboxId: query.mailbox_id, limit: query.limit ?? 100 });
  }

  @Post(':request_id/approve')
  @HttpCode(200)
  approve(
    @CurrentCaller() caller: Caller,
    @Param('request_id', new PathId('chk', 'request')) id: string,
    @Body() body: DecideRequestDto,
  ) {
    return this.approvals.decide(caller, id, 'approved', body.reason ?? null, { contentSha256: body.content_sha256 });
  }

  @Post(':request_id/reject')
  @HttpCode(200)
  reject(
    @CurrentCaller() caller: Caller,
    @Param('request_id', new PathId('chk', 'request')) id: string,
    @Body() body: DecideRequestDto,
  ) {
    return this.approvals.decide(caller, id, 'rejected', body.reason ?? null, { contentSha256: body.content_sha256 });
  }
}
