import { Injectable, Logger } from '@nestjs/common';
import { AlcartaError } from '../kernel/errors';
import { senderVerdict } from '../mail/authentication-results';
import { InboundDelivery, MessageService } from '../mail/message.service';
import { authenticationResultsHeaders, trustedProviderOutcomes } from '../mail/provider-authentication-results';
import { parseRfc822 } from '../mail/rfc822-parser';
import { SenderAuthenticator } from '../mail/sender-authenticator';
import { FolderPosition, MailboxSourceRepository } from './mailbox-source.repository';
import type { SourceSettings } from './source-settings';

/** One message fetched from a connected folder. */
export interface FetchedMessage {
  uid: number;
  source: Buffer;
  internalDate: Date | undefined;
}

/**
 * Stores what a connected folder's holder fetched through the one ingest path
 * (MessageService.storeEach): the same events, cursors and doorbells as mail that came by SMTP, so
 * waits, tasks, websockets and the console see no difference. A batch and the folder's new position
 * commit together: a message is stored exactly once however the connection or the holder fails,
 * and a UIDVALIDITY change that brings messages back finds them by Message-ID (a duplicate).
 */
@Injectable()
export class ImapMessageStore {
  private readonly logger = new Logger(ImapMessageStore.name);

  constructor(
    private readonly messages: MessageService,
    private readonly sources: MailboxSourceRepository,
    private readonly authenticator: SenderAuthenticator,
  ) {}

  /** Returns how many messages were stored (not duplicates, not skipped). */
  async store(
    holder: string,
    mailboxId: string,
    folder: string,
    settings: SourceSettings,
    batch: readonly FetchedMessage[],
    position: FolderPosition,
  ): Promise<number> {
    const deliveries: InboundDelivery[] = [];
    for (const fetched of batch) {
      const delivery = await this.toDelivery(mailboxId, settings, fetched);
      if (delivery) deliveries.push(delivery);
    }
    const stored = await this.messages.storeEach(deliveries, (manager) =>
      this.sources.savePosition(manager, holder, mailboxId, folder, position),
    );
    return stored.filter(([copy]) => !copy.duplicate).length;
  }

  private async toDelivery(
    mailboxId: string,
    settings: SourceSettings,
    fetched: FetchedMessage,
  ): Promise<InboundDelivery | undefined> {
    let message;
    try {
      message = await parseRfc822(fetched.source);
    } catch (err) {
      if (!(err instanceof AlcartaError)) throw err;
      // Mail that cannot be a message here (no From, say) stays in the account; the folder moves on.
      this.logger.warn({
        msg: 'a message of a connected folder cannot be stored',
        mailbox_id: mailboxId,
        uid: fetched.uid,
        reason: err.reason,
      });
      return undefined;
    }
    const trusted = trustedProviderOutcomes(
      authenticationResultsHeaders(fetched.source),
      settings.trusted_authserv_ids,
    );
    const verdict = trusted ? senderVerdict(trusted) : await this.authenticator.verify(fetched.source);
    return {
      mailboxIds: [mailboxId],
      message: { ...message, receivedAt: fetched.internalDate ?? null },
      verdict,
    };
  }
}
