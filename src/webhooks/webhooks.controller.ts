import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { CurrentCaller, RequireScopes } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { PathId } from '../http/validation';
import { CreateWebhookDto, ListDeliveriesQuery, ReplayWebhookDto, UpdateWebhookDto } from './dto/webhook.dto';
import { WebhooksService } from './webhooks.service';

/** Webhook endpoints (docs/webhooks.md): `admin`, or `webhooks:manage` within the token's mailboxes. */
@Controller('v1/webhooks')
@RequireScopes('webhooks:manage')
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Post()
  create(@CurrentCaller() caller: Caller, @Body() body: CreateWebhookDto) {
    return this.webhooks.create(caller, body);
  }

  @Get()
  list(@CurrentCaller() caller: Caller) {
    return this.webhooks.list(caller);
  }

  @Get(':webhook_id')
  get(@CurrentCaller() caller: Caller, @Param('webhook_id', new PathId('whk', 'webhook')) id: string) {
    return this.webhooks.get(caller, id);
  }

  @Patch(':webhook_id')
  update(
    @CurrentCaller() caller: Caller,
    @Param('webhook_id', new PathId('whk', 'webhook')) id: string,
    @Body() body: UpdateWebhookDto,
  ) {
    return this.webhooks.update(caller, id, body);
  }

  @Delete(':webhook_id')
  @HttpCode(204)
  async delete(@CurrentCaller() caller: Caller, @Param('webhook_id', new PathId('whk', 'webhook')) id: string) {
    await this.webhooks.delete(caller, id);
  }

  @Post(':webhook_id/rotate-secret')
  @HttpCode(200)
  rotateSecret(@CurrentCaller() caller: Caller, @Param('webhook_id', new PathId('whk', 'webhook')) id: string) {
    return this.webhooks.rotateSecret(caller, id);
  }

  @Post(':webhook_id/replay')
  @HttpCode(200)
  replay(
    @CurrentCaller() caller: Caller,
    @Param('webhook_id', new PathId('whk', 'webhook')) id: string,
    @Body() body: ReplayWebhookDto,
  ) {
    return this.webhooks.replay(caller, id, body);
  }

  @Get(':webhook_id/deliveries')
  deliveries(
    @CurrentCaller() caller: Caller,
    @Param('webhook_id', new PathId('whk', 'webhook')) id: string,
    @Query() query: ListDeliveriesQuery,
  ) {
    return this.webhooks.listDeliveries(caller, id, query.limit);
  }
}
