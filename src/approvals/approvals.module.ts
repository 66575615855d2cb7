import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuthModule } from '../auth/auth.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboxModule } from '../outbox/outbox.module';
import { ApprovalRequestEntity } from './approval-request.entity';
import { MailboxPoliciesModule } from './mailbox-policies.module';
import { ApprovalRequestRepository } from './approval-request.repository';
import { ApprovalService } from './approval.service';
import { ApprovedContentCheck } from './approved-content.check';
import { RequestDeadlines } from './request-deadlines';
import { RequestsController } from './requests.controller';
import { SeparationOfDuties } from './separation-of-duties';

@Module({
  imports: [
    TypeOrmModule.forFeature([ApprovalRequestEntity]),
    MailboxPoliciesModule,
    AuthModule,
    MailModule,
    OutboxModule,
    EventsModule,
  ],
  controllers: [RequestsController],
  providers: [ApprovalRequestRepository, ApprovalService, ApprovedContentCheck, RequestDeadlines, SeparationOfDuties],
  exports: [ApprovalService, MailboxPoliciesModule, RequestDeadlines, SeparationOfDuties],
})
export class ApprovalsModule {}
