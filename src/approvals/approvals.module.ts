import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuthModule } from '../auth/auth.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboxModule } from '../outbox/outbox.module';
import { ApprovalRequestEntity } from './approval-request.entity';
import { MailboxPolicyController } from './mailbox-policy.controller';
import { MailboxPolicyEntity } from './mailbox-policy.entity';
import { MailboxPolicyRepository } from './mailbox-policy.repository';
import { MailboxPolicyService } from './mailbox-policy.service';
import { ApprovalRequestRepository } from './approval-request.repository';
import { ApprovalService } from './approval.service';
import { ApprovedContentCheck } from './approved-content.check';
import { RequestDeadlines } from './request-deadlines';
import { RequestsController } from './requests.controller';
import { SeparationOfDuties } from './separation-of-duties';

@Module({
  imports: [
    TypeOrmModule.forFeature([ApprovalRequestEntity, MailboxPolicyEntity]),
    AuthModule,
    MailModule,
    OutboxModule,
    EventsModule,
  ],
  controllers: [RequestsController, MailboxPolicyController],
  providers: [
    ApprovalRequestRepository,
    ApprovalService,
    ApprovedContentCheck,
    MailboxPolicyRepository,
    MailboxPolicyService,
    RequestDeadlines,
    SeparationOfDuties,
  ],
  exports: [ApprovalService, MailboxPolicyRepository, RequestDeadlines, SeparationOfDuties],
})
export class ApprovalsModule {}
