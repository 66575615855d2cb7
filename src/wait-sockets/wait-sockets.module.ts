import { Module } from '@nestjs/common';
import { WaitsModule } from '../waits/waits.module';
import { TicketService } from './ticket.service';
import { AwaitDispatcher } from './await-dispatcher';
import { WaitSocketController } from './wait-socket.controller';
import { WaitSocketGateway } from './wait-socket.gateway';

/**
 * How a wait's result reaches its client (docs/agents.md, "Waits"): the blocking call, or a stored wait with its
 * single-use websocket URL (tickets, the socket path, the gateway that delivers the result).
 */
@Module({
  imports: [WaitsModule],
  controllers: [WaitSocketController],
  providers: [TicketService, AwaitDispatcher, WaitSocketGateway],
  exports: [AwaitDispatcher, TicketService],
})
export class WaitSocketsModule {}
