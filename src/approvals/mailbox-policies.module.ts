import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { MailModule } from '../mail/mail.module';
import { MailboxPolicyController } from './mailbox-policy.controller';
import { MailboxPolicyEntity } from './mailbox-policy.entity';
import { MailboxPolicyRepository } from './mailbox-policy.repository';
import { MailboxPolicyService } from './mailbox-policy.service';

/**
 * Approval policies per mailbox (docs/policies.md), on their own so that the operator's CLI can
 * read and set them without the request machinery (outbox, events) of ApprovalsModule.
 */
@Module({
  imports: [TypeOrmModule.forFeature([MailboxPolicyEntity]), MailModule],
  controllers: [MailboxPolicyController],
  providers: [MailboxPolicyRepository, MailboxPolicyService],
  exports: [MailboxPolicyRepository, MailboxPolicyService],
})
export class MailboxPoliciesModule {}
