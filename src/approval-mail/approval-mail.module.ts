import { MiddlewareConsumer, Module, NestModule, RequestMethod } from '@nestjs/common';
import express from 'express';
import { ApprovalsModule } from '../approvals/approvals.module';
import { ConsoleModule } from '../console/console.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboxModule } from '../outbox/outbox.module';
import { ApprovalLinkRepository } from './approval-link.repository';
import { ApprovalLinksController } from './approval-links.controller';
import { ApprovalLinksService } from './approval-links.service';
import { ApprovalMailRepository } from './approval-mail.repository';
import { ApprovalMailService } from './approval-mail.service';
import { ApprovalMailWorker } from './approval-mail.worker';
import { ApproversController } from './approvers.controller';
import { ApproversService } from './approvers.service';
import { MailboxApproverRepository } from './mailbox-approver.repository';

/** Approval by email (SPEC 11): mailbox approvers, the mails to them, and the pages their links open. */
@Module({
  imports: [ApprovalsModule, MailModule, OutboxModule, EventsModule, ConsoleModule],
  controllers: [ApproversController, ApprovalLinksController],
  providers: [
    MailboxApproverRepository,
    ApprovalLinkRepository,
    ApprovalMailRepository,
    ApproversService,
    ApprovalMailService,
    ApprovalMailWorker,
    ApprovalLinksService,
  ],
})
export class ApprovalMailModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    // The confirmation page's form posts application/x-www-form-urlencoded (a reason and a button).
    consumer
      .apply(express.urlencoded({ extended: false, limit: '16kb' }))
      .forRoutes({ path: 'console/links/:token', method: RequestMethod.POST });
  }
}
