import { Module } from '@nestjs/common';
import { ApprovalsModule } from '../approvals/approvals.module';
import { AuthModule } from '../auth/auth.module';
import { ConsoleModule } from '../console/console.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboxModule } from '../outbox/outbox.module';
import { ApprovalLinkRepository } from './approval-link.repository';
import { ApprovalLinksController } from './approval-links.controller';
import { ApprovalLinksService } from './approval-links.service';
import { ApprovalMailHousekeeping } from './approval-mail.housekeeping';
import { ApprovalMailRepository } from './approval-mail.repository';
import { ApprovalMailService } from './approval-mail.service';
import { ApprovalMailWorker } from './approval-mail.worker';
import { ApprovalReplyRepository } from './approval-reply.repository';
import { ApprovalReplyService } from './approval-reply.service';
import { ApproversController } from './approvers.controller';
import { ApproversService } from './approvers.service';
import { MailboxApproverRepository } from './mailbox-approver.repository';

/**
 * Approval by email (docs/approvers.md): mailbox approvers, the mails to them, the pages their links open
 * (under /console, so the console's middleware gives them its headers and parses their forms), and the
 * replies to the mails that decide as the links would.
 */
@Module({
  imports: [ApprovalsModule, AuthModule, MailModule, OutboxModule, EventsModule, ConsoleModule],
  controllers: [ApproversController, ApprovalLinksController],
  providers: [
    MailboxApproverRepository,
    ApprovalLinkRepository,
    ApprovalMailRepository,
    ApproversService,
    ApprovalMailService,
    ApprovalMailWorker,
    ApprovalLinksService,
    ApprovalMailHousekeeping,
    ApprovalReplyRepository,
    ApprovalReplyService,
  ],
  exports: [ApprovalMailHousekeeping],
})
export class ApprovalMailModule {}
