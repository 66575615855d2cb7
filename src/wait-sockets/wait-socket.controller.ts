import { Controller, Get, HttpCode } from '@nestjs/common';
import { Public } from '../kernel/route-decorators';
import { WAIT_SOCKET_PATH } from './wait-socket-url';

/**
 * A plain HTTP request to the websocket URL: a proxy hop dropped `Upgrade`/`Connection`. Say so
 * (docs/agents.md, "Waits"), and leave the ticket unused so the client can retry or fall back to `wait_id`.
 */
@Controller(WAIT_SOCKET_PATH)
@Public()
export class WaitSocketController {
  @Get()
  @HttpCode(400)
  upgradeRequired() {
    return {
      error: 'invalid_request',
      reason: 'upgrade_required',
      message:
        'This URL is a websocket: the request arrived without "Upgrade: websocket" / "Connection: Upgrade" ' +
        '(a proxy must forward them). The ticket was not used.',
    };
  }
}
