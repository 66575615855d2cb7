import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { GroupCommit } from './group-commit';
import { InboundMailService } from './inbound-mail.service';
import { InboundSmtpServer } from './inbound-smtp.server';
import { SmtpGuard } from './smtp-guard';
import { SmtpMetrics } from './smtp-metrics';

/** Inbound SMTP (docs/mail.md): the listener server.ts starts after the HTTP one. */
@Module({
  imports: [MailModule, AuthModule, EventsModule],
  providers: [InboundSmtpServer, InboundMailService, GroupCommit, SmtpGuard, SmtpMetrics],
  exports: [InboundSmtpServer],
})
export class SmtpModule {}
