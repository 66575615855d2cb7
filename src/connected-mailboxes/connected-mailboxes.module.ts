import { Module } from '@nestjs/common';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboxModule } from '../outbox/outbox.module';
import { SecretsModule } from '../secrets/secrets.module';
import { ConnectedSubmission } from './connected-submission';
import { ImapConnector } from './imap-connector';
import { ImapMessageStore } from './imap-message-store';
import { ImapSyncHolder } from './imap-sync-holder';
import { ImapSyncMetrics } from './imap-sync.metrics';
import { MailboxSourceController } from './mailbox-source.controller';
import { MailboxSourceRepository } from './mailbox-source.repository';
import { MailboxSourceService } from './mailbox-source.service';
import { SourceCheck } from './source-check';
import { SourceCredentials } from './source-credentials';
import { Xoauth2Tokens } from './xoauth2-tokens';

/**
 * Connected mailboxes (docs/connected-mailboxes.md): mailboxes backed by an existing IMAP account,
 * synced into the event log over IMAP IDLE and sending through the account's submission server.
 */
@Module({
  imports: [MailModule, OutboxModule, EventsModule, SecretsModule],
  controllers: [MailboxSourceController],
  providers: [
    MailboxSourceRepository,
    MailboxSourceService,
    SourceCredentials,
    SourceCheck,
    Xoauth2Tokens,
    ImapConnector,
    ImapMessageStore,
    ImapSyncHolder,
    ImapSyncMetrics,
    ConnectedSubmission,
  ],
  exports: [MailboxSourceService],
})
export class ConnectedMailboxesModule {}
