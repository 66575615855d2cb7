import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, In, Repository } from 'typeorm';
import { OutboundDeliveryEntity } from './outbound-delivery.entity';

@Injectable()
export class OutboundDeliveryRepository {
  constructor(
    @InjectRepository(OutboundDeliveryEntity) private readonly deliveries: Repository<OutboundDeliveryEntity>,
  ) {}

  async insert(manager: EntityManager, delivery: OutboundDeliveryEntity): Promise<void> {
    await manager.insert(OutboundDeliveryEntity, delivery);
  }

  findByMessageIds(messageIds: readonly string[]): Promise<OutboundDeliveryEntity[]> {
    return this.deliveries.findBy({ messageId: In([...messageIds]) });
  }
}
