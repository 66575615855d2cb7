import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { MailboxAccess } from '../kernel/caller';
import { AppConfig } from '../config/app-config';
import { OutboundMessageFields } from './outbound-mail';

/** How many messages the console outbox holds; older ones are dropped first. */
export const KEPT_MAIL_LIMIT = 200;

/** What a kept message was: mail of a mailbox an approver let go, or an approval mail to an approver. */
export type KeptMailKind = 'message' | 'approval_mail';

/** One outbound mail as the relay would have received it, kept instead of sent. */
export interface KeptMail extends OutboundMessageFields {
  /** A number counting up from 1 in this process: the console outbox page's address of the mail. */
  id: number;
  kind: KeptMailKind;
  /** The mailbox the mail is of, or (an approval mail) whose request it asks about. */
  mailboxId: string;
  keptAt: Date;
  /** The message as composed for the relay (headers, MIME parts, DKIM signature when configured). */
  source: string;
}

/**
 * Outbound mail kept instead of sent, for local development (ALCARTA_SMTP_RELAY_URL=console:): the
 * relay hands each composed mail here, and the console outbox page shows it. Held in this process's
 * memory only (the newest KEPT_MAIL_LIMIT), so it is gone at restart, and each replica shows the
 * mail it composed itself.
 */
@Injectable()
export class KeptMailStore implements OnApplicationBootstrap {
  private readonly logger = new Logger('Outbox');
  private readonly mails: KeptMail[] = [];
  private lastId = 0;

  constructor(private readonly config: AppConfig) {}

  get enabled(): boolean {
    return this.config.keepsOutboundMail;
  }

  onApplicationBootstrap(): void {
    if (!this.enabled) return;
    this.logger.warn({
      msg: 'ALCARTA_SMTP_RELAY_URL=console: outbound mail is kept, not sent (for local development only)',
      outbox_page: `${this.config.publicUrl}/console/outbox`,
    });
  }

  keep(mail: Omit<KeptMail, 'id' | 'keptAt'>): KeptMail {
    const kept = { ...mail, id: ++this.lastId, keptAt: new Date() };
    this.mails.push(kept);
    if (this.mails.length > KEPT_MAIL_LIMIT) this.mails.shift();
    return kept;
  }

  /** The kept mail of the mailboxes `access` reaches, newest first. */
  list(access: MailboxAccess): KeptMail[] {
    return this.mails.filter((m) => reaches(access, m.mailboxId)).reverse();
  }

  /** One kept mail, if it is still held and of a mailbox `access` reaches. */
  find(access: MailboxAccess, id: number): KeptMail | undefined {
    const mail = this.mails.find((m) => m.id === id);
    return mail && reaches(access, mail.mailboxId) ? mail : undefined;
  }
}

function reaches(access: MailboxAccess, mailboxId: string): boolean {
  return access.all || access.ids.includes(mailboxId);
}
