import { readFileSync } from 'node:fs';
import { Injectable } from '@nestjs/common';
import { createTransport, Transporter } from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import type StreamTransport from 'nodemailer/lib/stream-transport';
import { repairText } from '../common/text-safety';
import { AppConfig } from '../config/app-config';
import { KeptMailKind, KeptMailStore } from './kept-mail';
import { composeOutboundMail, DkimSigning, OutboundMessageFields } from './outbound-mail';

/** What one delivery attempt came to. */
export type AttemptOutcome =
  | { kind: 'sent'; response: string }
  /** 4xx, connection trouble, a timeout: try again later. */
  | { kind: 'temporary'; error: string }
  /** 5xx: the relay will not take it, retrying cannot help. */
  | { kind: 'permanent'; error: string };

/** Whose mail an attempt sends: the console outbox shows kept mail to those who reach its mailbox. */
export interface MailOrigin {
  kind: KeptMailKind;
  mailboxId: string;
}

/** The delivery's `response` when ALCARTA_SMTP_RELAY_URL=console: kept the mail instead of sending it. */
export const KEPT_RESPONSE = 'kept in the console outbox (ALCARTA_SMTP_RELAY_URL=console:), not sent';

/** Longest stored relay answer or error. */
const MAX_TEXT = 2000;

/** The relay's connection settings from ALCARTA_SMTP_RELAY_URL (smtp: STARTTLS when offered; smtps: TLS). */
export function relayTransportOptions(relayUrl: string, timeoutMs: number, clientName: string): SMTPTransport.Options {
  const url = new URL(relayUrl);
  const secure = url.protocol === 'smtps:';
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    ...(url.username && {
      auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) },
    }),
    name: clientName,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
  };
}

/** The outcome of a failed attempt: 5xx answers are permanent, everything else temporary. */
export function classifyFailure(err: unknown, timeoutMs: number): AttemptOutcome {
  const e = err as { responseCode?: unknown; message?: unknown; name?: unknown; code?: unknown };
  if (e?.code === 'EABORT' || e?.name === 'AbortError') {
    return { kind: 'temporary', error: `the delivery attempt timed out after ${Math.round(timeoutMs / 1000)} s` };
  }
  const message = typeof e?.message === 'string' ? e.message : String(err);
  const code = typeof e?.responseCode === 'number' ? e.responseCode : undefined;
  if (code !== undefined && code >= 500 && code < 600) return { kind: 'permanent', error: message };
  return { kind: 'temporary', error: message };
}

/**
 * Sends outbound mail through the configured relay (nodemailer). With `console:` it composes each
 * mail the same way but keeps it for the console outbox page (nodemailer's stream transport): the
 * attempt counts as sent. One attempt is cut off after
 * `attemptTimeoutMs`, half the outbox lease, so a replica gives up and records the outcome long
 * before another replica may take the message over: healthy replicas never send a message twice.
 * Texts it returns never contain the relay's password.
 */
@Injectable()
export class SmtpRelay {
  readonly attemptTimeoutMs: number;
  private readonly transport: Transporter<SMTPTransport.SentMessageInfo> | undefined;
  private readonly keeping: Transporter<StreamTransport.SentMessageInfo> | undefined;
  private readonly dkim: DkimSigning | undefined;
  private readonly secrets: string[];

  constructor(
    config: AppConfig,
    private readonly kept: KeptMailStore,
  ) {
    this.attemptTimeoutMs = Math.max(1000, Math.floor(config.outboxLeaseMs / 2));
    this.secrets = [];
    if (config.keepsOutboundMail) {
      this.keeping = createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
    } else if (config.smtpRelayUrl) {
      const options = relayTransportOptions(config.smtpRelayUrl, this.attemptTimeoutMs, config.smtpHostname);
      this.transport = createTransport(options);
      this.secrets = [options.auth?.pass, new URL(config.smtpRelayUrl).password].filter(
        (s): s is string => typeof s === 'string' && s.length > 0,
      );
    }
    // Read once at start: a missing or unreadable key stops the start-up with a clear error.
    this.dkim = config.dkim && { selector: config.dkim.selector, privateKey: readDkimKey(config.dkim.privateKeyFile) };
  }

  get configured(): boolean {
    return this.transport !== undefined || this.keeping !== undefined;
  }

  async send(message: OutboundMessageFields, origin: MailOrigin): Promise<AttemptOutcome> {
    if (this.keeping) return this.keep(message, origin);
    if (!this.transport) return { kind: 'permanent', error: 'no outbound relay is configured' };
    const mail: Mail.Options & { signal?: AbortSignal } = {
      ...composeOutboundMail(message, this.dkim),
      signal: AbortSignal.timeout(this.attemptTimeoutMs),
    };
    try {
      const info = await this.transport.sendMail(mail);
      const rejected = (info.rejected as Array<string | Mail.Address>).map((r) =>
        typeof r === 'string' ? r : r.address,
      );
      const response = rejected.length > 0 ? `${info.response} (refused: ${rejected.join(', ')})` : info.response;
      return { kind: 'sent', response: this.clean(response) };
    } catch (err) {
      const outcome = classifyFailure(err, this.attemptTimeoutMs);
      return outcome.kind === 'sent' ? outcome : { ...outcome, error: this.clean(outcome.error) };
    }
  }

  private async keep(message: OutboundMessageFields, origin: MailOrigin): Promise<AttemptOutcome> {
    try {
      const info = await this.keeping!.sendMail(composeOutboundMail(message, this.dkim));
      // `buffer: true`: the composed message comes back whole, as a Buffer.
      this.kept.keep({ ...message, ...origin, source: (info.message as Buffer).toString('utf8') });
      return { kind: 'sent', response: KEPT_RESPONSE };
    } catch (err) {
      // Composing failed (a DKIM key nodemailer cannot use): a relay could not have taken it either.
      return { kind: 'permanent', error: this.clean((err as Error).message) };
    }
  }

  close(): void {
    this.transport?.close();
  }

  /** Cut to MAX_TEXT, storable, and without the relay's password (an answer could echo what we sent). */
  private clean(text: string): string {
    let out = repairText(String(text ?? ''));
    for (const secret of this.secrets) out = out.split(secret).join('[redacted]');
    return out.length > MAX_TEXT ? `${out.slice(0, MAX_TEXT)}…` : out;
  }
}

function readDkimKey(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`ALCARTA_DKIM_PRIVATE_KEY_FILE cannot be read: ${(err as Error).message}`, { cause: err });
  }
}
