import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboxModule } from '../outbox/outbox.module';
import { ApprovalRequestEntity } from './approval-request.entity';
import { ApprovalRequestRepository } from './approval-request.repository';
import { ApprovalService } from './approval.service';
import { ApprovedContentCheck } from './approved-content.check';
import { RequestExpirySweeper } from './request-expiry.sweeper';
import { RequestsController } from './requests.controller';

@Module({
  imports: [TypeOrmModule.forFeature([ApprovalRequestEntity]), MailModule, OutboxModule, EventsModule],
  controllers: [RequestsController],
  providers: [ApprovalRequestRepository, ApprovalService, ApprovedContentCheck, RequestExpirySweeper],
  exports: [ApprovalService, RequestExpirySweeper],
})
export class ApprovalsModule {}
