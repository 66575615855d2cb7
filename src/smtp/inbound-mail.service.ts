import { Readable } from 'node:stream';
import { Inject, Injectable } from '@nestjs/common';
import { Logger } from 'pino';
import { Caller } from '../kernel/caller';
import { TokenService } from '../auth/token.service';
import { AlcartaError } from '../kernel/errors';
import { fanOut } from '../common/stream-fan-out';
import { classifyDatabaseError } from '../database/database-errors';
import { ROOT_LOGGER } from '../logging/logging.module';
import { InboundMessage } from '../mail/inbound-message';
import { MailboxService } from '../mail/mailbox.service';
import { StoredInbound } from '../mail/message.service';
import { parseRfc822 } from '../mail/rfc822-parser';
import { SenderAuthenticator, SmtpEnvelopeContext } from '../mail/sender-authenticator';
import { GroupCommit } from './group-commit';
import { mailboxAddressOf } from '../mail/mailbox-address';
import { SmtpRefusal } from './smtp-refusal';

/** The temporary refusal for anything that failed on our side: the sending MTA queues and retries. */
function temporaryFailure(err: unknown): SmtpRefusal {
  return classifyDatabaseError(err) === 'unavailable'
    ? new SmtpRefusal(451, 'database_unavailable', 'The mail store is unavailable; try again later.')
    : new SmtpRefusal(451, 'storage_error', 'Local error while storing the message; try again later.');
}

/**
 * The rules of inbound SMTP (docs/mail.md), apart from the SMTP dialogue itself (InboundSmtpServer): who
 * may deliver (AUTH with a `mail:ingest` token), which recipients are ours, and storing a received
 * message in every recipient mailbox through the one ingest path (MessageService.store/storeEach)
 * that REST raw ingest uses too. Refusals are SmtpRefusal with the reply code the client gets.
 */
@Injectable()
export class InboundMailService {
  constructor(
    private readonly tokens: TokenService,
    private readonly mailboxes: MailboxService,
    private readonly groupCommit: GroupCommit,
    private readonly authenticator: SenderAuthenticator,
    @Inject(ROOT_LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * The caller behind an AUTH password: a token secret with `mail:ingest` (admin implies it). The user
   * name is ignored. Unknown, revoked, expired and under-scoped tokens are refused alike (535).
   */
  async authenticate(secret: string): Promise<Caller> {
    let caller: Caller | null;
    try {
      caller = await this.tokens.authenticate(secret);
    } catch (err) {
      this.logger.warn({ component: 'smtp', err: errorSummary(err) }, 'SMTP AUTH could not check the token');
      throw new SmtpRefusal(454, 'database_unavailable', 'Temporary authentication failure; try again later.');
    }
    if (!caller || !caller.hasScope('mail:ingest')) {
      throw new SmtpRefusal(535, 'auth_failed', 'Authentication failed: the password must be a mail:ingest token.');
    }
    return caller;
  }

  /**
   * The mailbox id a RCPT TO delivers to. A client authenticated with a token bound to some mailboxes
   * delivers only to those; other addresses are refused like unknown ones (550 5.1.1), so they cannot
   * be probed.
   */
  async recipientMailbox(recipient: string, caller: Caller | undefined): Promise<string> {
    const address = mailboxAddressOf(recipient);
    let mailbox;
    try {
      mailbox = address === undefined ? null : await this.mailboxes.findByAddress(address);
    } catch (err) {
      throw temporaryFailure(err);
    }
    if (!mailbox || (caller && !caller.canSeeMailbox(mailbox.id))) {
      throw new SmtpRefusal(550, 'unknown_recipient', `No mailbox here for <${recipient}>.`);
    }
    return mailbox.id;
  }

  /**
   * Parses, authenticates and stores a message in each of `mailboxIds`, all or none in one
   * transaction, as it streams in: the parser and the sender checks read it side by side and keep
   * only what is stored. Resolves only after the commit, so the 250 that follows never promises mail
   * that a crash could lose. Rejects with the stream's error if it fails (the client left, or the
   * intake gave up on the message); aborting `signal` (the session ended) stores nothing that is not
   * committing yet. `parsed` is told when the message is parsed (its raw bytes are garbage then).
   */
  async deliver(
    raw: Readable,
    mailboxIds: readonly string[],
    smtp: SmtpEnvelopeContext,
    { signal, parsed }: { signal?: AbortSignal; parsed?: () => void } = {},
  ): Promise<StoredInbound[]> {
    const [forParser, forAuthenticator] = fanOut(raw, 2);
    // Never rejects: a message it cannot read is `permerror`.
    const verdict = this.authenticator.verify(forAuthenticator, smtp);
    let message: InboundMessage;
    try {
      message = await parseRfc822(forParser);
    } catch (err) {
      if (err instanceof AlcartaError) throw new SmtpRefusal(554, 'unparseable', `Message refused: ${err.message}`);
      throw err;
    }
    parsed?.();
    try {
      return await this.groupCommit.store({ mailboxIds, message, verdict: await verdict }, signal);
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      const failure = classifyDatabaseError(err);
      if (failure === 'invalid_input') {
        throw new SmtpRefusal(554, 'unparseable', 'Message refused: a value in it cannot be stored.');
      }
      if (failure === undefined) {
        this.logger.error({ component: 'smtp', err: errorSummary(err) }, 'storing an SMTP message failed');
      }
      throw temporaryFailure(err);
    }
  }
}

/** An error for the log without query parameters (they carry message content). */
function errorSummary(err: unknown): { name?: string; message: string; code?: unknown } {
  if (!(err instanceof Error)) return { message: String(err) };
  return { name: err.name, message: err.message, code: (err as { code?: unknown }).code };
}
