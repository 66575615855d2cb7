import { Module } from '@nestjs/common';
import { WaitsModule } from '../waits/waits.module';
import { WaitSocketController } from './wait-socket.controller';
import { WaitSocketGateway } from './wait-socket.gateway';

/** Websocket delivery of persisted waits (SPEC §4 "Websocket delivery"). */
@Module({
  imports: [WaitsModule],
  controllers: [WaitSocketController],
  providers: [WaitSocketGateway],
})
export class DeliveryModule {}
