import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { createTransport } from 'nodemailer';
import { classifyFailure, AttemptOutcome } from '../outbox/smtp-relay';
import { composeOutboundMail, OutboundMessageFields } from '../outbox/outbound-mail';
import { OutboundRoute, OutboundRouteProvider, OutboundRoutes } from '../outbox/outbound-routes';
import { repairText } from '../common/text-safety';
import { ImapConnector } from './imap-connector';
import { MailboxSourceRepository } from './mailbox-source.repository';
import { LoadedSource, SourceCredentials } from './source-credentials';
import { SourceFailure } from './source-failure';

/** Longest stored submission answer or error. */
const MAX_TEXT = 2000;

/**
 * Approved mail of a connected mailbox leaves through the account's own submission server
 * (docs/connected-mailboxes.md, "Sending"), signed in as the account (password or XOAUTH2), with
 * the delivery states of every outbound message. Once sent, the same bytes are appended to the
 * account's `save_sent` folder, so the company's mailbox shows what its agent sent. A copy that
 * cannot be appended does not make the delivery fail (the mail left): it is logged.
 */
@Injectable()
export class ConnectedSubmission implements OutboundRouteProvider, OnModuleInit {
  private readonly logger = new Logger(ConnectedSubmission.name);
  private readonly composer = createTransport({ streamTransport: true, buffer: true, newline: 'windows' });

  constructor(
    private readonly routes: OutboundRoutes,
    private readonly sources: MailboxSourceRepository,
    private readonly credentials: SourceCredentials,
    private readonly connector: ImapConnector,
  ) {}

  onModuleInit(): void {
    this.routes.provide(this);
  }

  hasOwnRoute(mailboxId: string, manager?: EntityManager): Promise<boolean> {
    return this.sources.sendsOnItsOwn(mailboxId, manager);
  }

  async routeFor(mailboxId: string): Promise<OutboundRoute | undefined> {
    const source = await this.credentials.load(mailboxId);
    if (!source?.settings.smtp) return undefined;
    return { send: (message, signal) => this.send(source, message, signal) };
  }

  private async send(
    source: LoadedSource,
    message: OutboundMessageFields,
    signal: AbortSignal,
  ): Promise<AttemptOutcome> {
    const composed = await this.composer.sendMail(composeOutboundMail(message));
    const raw = composed.message as Buffer;
    const envelope = { from: message.from, to: [...message.to, ...message.cc] };
    let outcome: AttemptOutcome;
    try {
      const transport = await this.connector.smtp(source);
      try {
        const info = await transport.sendMail({ envelope, raw, signal });
        outcome = { kind: 'sent', response: clean(info.response) };
      } finally {
        transport.close();
      }
    } catch (err) {
      if (err instanceof SourceFailure) return { kind: 'temporary', error: clean(err.message) };
      const failed = classifyFailure(err, 0);
      return failed.kind === 'sent' ? failed : { ...failed, error: clean(failed.error) };
    }
    if (source.settings.save_sent) await this.keepCopy(source, source.settings.save_sent, raw, message.receivedAt);
    return outcome;
  }

  private async keepCopy(source: LoadedSource, folder: string, raw: Buffer, date: Date): Promise<void> {
    try {
      const client = await this.connector.open(source);
      try {
        await client.append(folder, raw, ['\\Seen'], date);
      } finally {
        await client.logout().catch(() => client.close());
      }
    } catch (err) {
      this.logger.warn({
        msg: 'sent mail could not be copied to the connected account',
        mailbox_id: source.mailboxId,
        folder,
        error: (err as Error).message,
      });
    }
  }
}

function clean(text: string): string {
  const out = repairText(String(text ?? ''));
  return out.length > MAX_TEXT ? `${out.slice(0, MAX_TEXT)}…` : out;
}
