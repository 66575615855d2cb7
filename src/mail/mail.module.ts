import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventsModule } from '../events/events.module';
import { MailHooks } from './mail-hooks';
import { MailboxEntity } from './mailbox.entity';
import { MailboxRepository } from './mailbox.repository';
import { MailboxService } from './mailbox.service';
import { MailboxesController } from './mailboxes.controller';
import { MessageEntity } from './message.entity';
import { MessageIngestController } from './message-ingest.controller';
import { MessageRepository } from './message.repository';
import { MessageSequence } from './message-sequence';
import { MessageService } from './message.service';
import { SenderAuthenticator } from './sender-authenticator';

@Module({
  imports: [TypeOrmModule.forFeature([MailboxEntity, MessageEntity]), EventsModule],
  controllers: [MailboxesController, MessageIngestController],
  providers: [
    MailboxRepository,
    MessageRepository,
    MessageSequence,
    MailboxService,
    MessageService,
    MailHooks,
    SenderAuthenticator,
  ],
  exports: [MailboxService, MessageService, MailHooks, SenderAuthenticator],
})
export class MailModule {}
