import { Injectable } from '@nestjs/common';
import { ImapFlow, ImapFlowOptions } from 'imapflow';
import { createTransport, Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import { AppConfig } from '../config/app-config';
import { SourceCredentials, LoadedSource } from './source-credentials';
import { SourceFailure } from './source-failure';
import type { TlsMode } from './source-settings';

/** Errors of the network below IMAP: the host is not there or does not answer. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'ECONNRESET',
  'EPIPE',
  'CONNECT_TIMEOUT',
  'NoConnection',
  'EConnectionClosed',
  'ClosedAfterConnectText',
  'ETIMEOUT',
]);

/** A message larger than this cannot be read from a connected folder (see ImapFolderReader). */
export const LITERAL_HEADROOM_BYTES = 1024 * 1024;

/**
 * Opens connections to connected accounts: IMAP with imapflow and SMTP submission with nodemailer,
 * with the account's TLS mode, and signed in with its password or an XOAUTH2 access token. Failures
 * become SourceFailure with the stage that failed and a message an operator can act on.
 */
@Injectable()
export class ImapConnector {
  constructor(
    private readonly config: AppConfig,
    private readonly credentials: SourceCredentials,
  ) {}

  /** Connects and signs in; `idle`: the connection will sit in IDLE (renewed every ALCARTA_IMAP_IDLE_SECONDS). */
  async open(source: LoadedSource, { idle = false } = {}): Promise<ImapFlow> {
    const { settings } = source;
    const auth = await this.credentials.imapAuth(source);
    const timeout = this.config.imapConnectTimeoutMs;
    const options: ImapFlowOptions = {
      host: settings.host,
      port: settings.port,
      ...tlsOptions(settings.tls),
      auth,
      logger: false,
      disableAutoIdle: true,
      connectionTimeout: timeout,
      greetingTimeout: timeout,
      // An IDLE connection hears nothing but the server's keep-alives between renewals.
      socketTimeout: idle ? this.config.imapIdleMs + 60_000 : Math.max(timeout, 60_000),
      ...(idle && { maxIdleTime: this.config.imapIdleMs }),
      maxLiteralSize: this.config.maxIngestBytes + LITERAL_HEADROOM_BYTES,
      clientInfo: { name: 'Alcarta' },
    };
    const client = new ImapFlow(options);
    // Until connect() settles, errors reject it; after, they arrive here (and the connection closes).
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (err) {
      client.close();
      const failure = imapFailure(err, settings.host, settings.port, settings.tls);
      if (failure.reason === 'source_auth_failed') this.credentials.refused(source);
      throw failure;
    }
    return client;
  }

  /** A one-message SMTP submission transport of the account (closed by the caller). */
  async smtp(source: LoadedSource): Promise<Transporter<SMTPTransport.SentMessageInfo>> {
    const smtp = source.settings.smtp;
    if (!smtp) throw new Error('the account has no submission server');
    const timeout = this.config.imapConnectTimeoutMs;
    const auth = await this.credentials.smtpAuth(source);
    return createTransport({
      host: smtp.host,
      port: smtp.port,
      secure: smtp.tls === 'implicit',
      requireTLS: smtp.tls === 'starttls',
      ignoreTLS: smtp.tls === 'none',
      auth,
      name: this.config.smtpHostname,
      connectionTimeout: timeout,
      greetingTimeout: timeout,
      socketTimeout: Math.max(timeout, 60_000),
    });
  }
}

function tlsOptions(tls: TlsMode): Pick<ImapFlowOptions, 'secure' | 'doSTARTTLS'> {
  if (tls === 'implicit') return { secure: true };
  return { secure: false, doSTARTTLS: tls === 'starttls' };
}

/** What an imapflow error means for the operator. */
export function imapFailure(err: unknown, host: string, port: number, tls: TlsMode): SourceFailure {
  const e = err as { authenticationFailed?: boolean; tlsFailed?: boolean; code?: string; message?: string };
  const where = `${host}:${port}`;
  const detail = e?.message ? `: ${e.message}` : '';
  if (e?.authenticationFailed) {
    return new SourceFailure('auth', 'source_auth_failed', `${where} refused the sign-in${detail}.`);
  }
  const code = typeof e?.code === 'string' ? e.code : '';
  if (
    e?.tlsFailed ||
    /^ERR_SSL|^ERR_TLS|CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ClosedAfterConnectTLS|UPGRADE_TIMEOUT/.test(code)
  ) {
    return new SourceFailure(
      'tls',
      'source_tls_failed',
      `TLS with ${where} failed${detail} (${code || 'tls'}); check "tls" (${tls}) against what the port expects.`,
    );
  }
  if (code === 'GREETING_TIMEOUT') {
    return new SourceFailure(
      tls === 'implicit' ? 'connect' : 'tls',
      tls === 'implicit' ? 'source_unreachable' : 'source_tls_failed',
      tls === 'implicit'
        ? `${where} accepted the connection but sent no IMAP greeting in time.`
        : `${where} sent no IMAP greeting in time: if the port expects TLS from the first byte (993), set "tls" to "implicit"; otherwise check that the port is the account's IMAP port.`,
    );
  }
  if (UNREACHABLE_CODES.has(code)) {
    return new SourceFailure('connect', 'source_unreachable', `${where} could not be reached (${code})${detail}.`);
  }
  return new SourceFailure('connect', 'source_unreachable', `The connection to ${where} failed${detail}.`);
}
