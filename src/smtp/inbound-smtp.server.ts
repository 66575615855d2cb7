import { readFile } from 'node:fs/promises';
import { AddressInfo } from 'node:net';
import { BeforeApplicationShutdown, Inject, Injectable } from '@nestjs/common';
import { Logger } from 'pino';
import {
  SMTPServerAddress,
  SMTPServerAuthentication,
  SMTPServerAuthenticationResponse,
  SMTPServerDataStream,
  SMTPServerEnvelope,
  SMTPServerOptions,
  SMTPServerSession,
} from 'smtp-server';
import { Caller } from '../kernel/caller';
import { AppConfig } from '../config/app-config';
import { DrainState } from '../lifecycle/drain-state';
import { ROOT_LOGGER } from '../logging/logging.module';
import { ByteBudget, FinishingGate } from './byte-budget';
import { GarbageRelief } from './garbage-relief';
import { InboundMailService } from './inbound-mail.service';
import { budgetSpent, MessageIntake } from './message-intake';
import { SmtpGuard } from './smtp-guard';
import { SmtpListener } from './smtp-listener';
import { SmtpMetrics } from './smtp-metrics';
import { SmtpRefusal } from './smtp-refusal';

/** RFC 3463 4.3.2 "system not accepting network messages": the reply to sessions while draining. */
const SHUTTING_DOWN = '4.3.2 Service shutting down; try again later';

/** A received message's RCPT TOs beyond this are refused (452): each one costs a mailbox lookup. */
const MAX_RECIPIENTS = 100;

/**
 * After the sessions are told to go, how long closing waits for clients to hang up before it stops
 * waiting (their sockets are destroyed by smtp-server's own half-close deadline).
 */
const CLOSE_WAIT_MS = 2000;

/**
 * Share of ALCARTA_SHUTDOWN_GRACE_SECONDS that mail transactions in flight get to finish after
 * SIGTERM; the rest is for closing the HTTP server, the database and an embedded PostgreSQL.
 */
const DRAIN_SHARE_OF_GRACE = 0.7;

type DataCallback = (err?: Error | null, message?: string) => void;

/**
 * The inbound SMTP listener (docs/mail.md) on smtp-server: the SMTP dialogue, TLS, AUTH, size limit,
 * sessions, metrics and drain. What may be delivered where is InboundMailService's; who may keep
 * talking (guesses, revoked tokens) is SmtpGuard's.
 *
 * Memory is bounded whatever senders do: a message streams through the parser as it arrives (only
 * what is stored is held), and every message in flight holds its bytes of the server-wide
 * ByteBudget (ALCARTA_SMTP_MAX_BYTES_IN_FLIGHT) until it is stored or refused; a message that finds
 * it spent is refused with 452 4.3.1, and its sender retries later.
 *
 * Lifecycle: `listen()` from server.ts after the HTTP listener; on drain (SIGTERM) new sessions and
 * new transactions get 421 4.3.2 while transactions in flight (MAIL FROM given) may finish within
 * DRAIN_SHARE_OF_GRACE of the grace period; then, before the database closes, every session left
 * gets 421 and the listener closes.
 */
@Injectable()
export class InboundSmtpServer implements BeforeApplicationShutdown {
  private server: SmtpListener | undefined;
  private draining = false;
  private readonly budget: ByteBudget;
  /** The size limit: a message larger than the whole budget could never be taken in. */
  private readonly maxMessageBytes: number;
  private readonly finishing: FinishingGate;
  private readonly relief: GarbageRelief;
  /** Open sessions (their ids), for the active-sessions gauge. */
  private readonly sessions = new Set<string>();
  /** Sessions with a mail transaction in flight: the ones a drain waits for. */
  private readonly transactions = new Set<string>();
  private readonly whenNoTransactions: Array<() => void> = [];
  /** The mailboxes the accepted RCPT TOs of an envelope deliver to. */
  private readonly recipients = new WeakMap<SMTPServerEnvelope, Set<string>>();
  /** Deliveries being stored: closing waits for them so the database outlives them. */
  private readonly deliveries = new Set<Promise<void>>();

  constructor(
    private readonly config: AppConfig,
    private readonly inbound: InboundMailService,
    private readonly guard: SmtpGuard,
    private readonly metrics: SmtpMetrics,
    drain: DrainState,
    @Inject(ROOT_LOGGER) private readonly logger: Logger,
  ) {
    this.budget = new ByteBudget(config.smtpMaxBytesInFlight);
    this.maxMessageBytes = Math.min(config.maxIngestBytes, config.smtpMaxBytesInFlight);
    // One message of the largest size finishes at a time, or several smaller ones together.
    this.finishing = new FinishingGate(this.maxMessageBytes);
    this.relief = new GarbageRelief(config.smtpMaxBytesInFlight / 16);
    metrics.observe({
      bytesInFlight: () => this.budget.inFlight,
      throttledClients: () => this.guard.throttledClients,
    });
    drain.onDrain(() => this.drain());
  }

  /** Starts listening on ALCARTA_SMTP_PORT; resolves with the bound port, undefined when SMTP is off. */
  async listen(): Promise<number | undefined> {
    if (this.config.smtpPort === undefined) return undefined;
    const server = new SmtpListener(await this.options());
    server.on('error', (err) => {
      // Connection-level trouble (a client resetting its socket); the session is already gone.
      this.logger.debug({ component: 'smtp', err: { message: err.message, code: (err as { code?: unknown }).code } });
    });
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.listen(this.config.smtpPort, this.config.host, () => {
        server.server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.guard.watch(server);
    const port = (server.server.address() as AddressInfo).port;
    this.logger.info(
      { component: 'smtp', port, tls: !!this.config.smtpTls, auth: this.config.smtpAuthRequired },
      'SMTP is listening',
    );
    return port;
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.close();
  }

  private async options(): Promise<SMTPServerOptions> {
    const tls = this.config.smtpTls;
    const disabledCommands = [...(tls ? [] : ['STARTTLS']), ...(this.config.smtpAuthRequired ? [] : ['AUTH'])];
    return {
      name: this.config.smtpHostname,
      banner: 'Alcarta',
      logger: false,
      disableReverseLookup: true,
      size: this.maxMessageBytes,
      rejectOversized: true,
      maxClients: this.config.smtpMaxClients,
      maxRecipients: MAX_RECIPIENTS,
      hideENHANCEDSTATUSCODES: false,
      disabledCommands,
      ...(tls && {
        key: await readFile(tls.keyFile),
        cert: await readFile(tls.certFile),
      }),
      authMethods: ['PLAIN', 'LOGIN'],
      // AUTH is checked in onMailFrom (so refusals are counted); smtp-server's own check is off.
      authOptional: true,
      // With TLS configured a password (a token) only travels after STARTTLS. Without it, AUTH in
      // clear text is the only AUTH there is: meant for loopback or a private network behind a relay.
      allowInsecureAuth: !tls,
      closeTimeout: CLOSE_WAIT_MS,
      onConnect: (session, callback) => this.onConnect(session, callback),
      onClose: (session) => this.onClose(session),
      onAuth: (auth, session, callback) => void this.onAuth(auth, session, callback),
      onMailFrom: (address, session, callback) => this.onMailFrom(address, session, callback),
      onRcptTo: (address, session, callback) => void this.onRcptTo(address, session, callback),
      onData: (stream, session, callback) => this.onData(stream, session, callback),
    };
  }

  private onConnect(session: SMTPServerSession, callback: (err?: Error | null) => void): void {
    if (this.draining) {
      this.metrics.refused('shutting_down');
      return callback(new SmtpRefusal(421, 'shutting_down', SHUTTING_DOWN));
    }
    const admission = this.guard.admit(session);
    if ('refused' in admission) return callback(admission.refused);
    this.sessions.add(session.id);
    this.metrics.sessionsActive.inc();
    this.metrics.sessionsTotal.inc();
    if (admission.delayMs === 0) return callback();
    // A client that talks before the greeting gets smtp-server's 421 "You talk too soon".
    setTimeout(() => callback(), admission.delayMs).unref();
  }

  private onClose(session: SMTPServerSession): void {
    if (this.sessions.delete(session.id)) this.metrics.sessionsActive.dec();
    this.guard.closed(session);
    this.endTransaction(session.id);
  }

  private async onAuth(
    auth: SMTPServerAuthentication,
    session: SMTPServerSession,
    callback: (err: Error | null | undefined, response?: SMTPServerAuthenticationResponse) => void,
  ): Promise<void> {
    let caller: Caller;
    try {
      caller = this.guard.stillValid(await this.inbound.authenticate(auth.password ?? ''));
    } catch (err) {
      return callback(this.refusal(this.guard.judge(session, err)));
    }
    callback(null, { user: caller });
  }

  private onMailFrom(
    address: SMTPServerAddress,
    session: SMTPServerSession,
    callback: (err?: Error | null) => void,
  ): void {
    if (this.draining) {
      this.metrics.refused('shutting_down');
      return callback(new SmtpRefusal(421, 'shutting_down', 'Service shutting down; try again later'));
    }
    if (this.config.smtpAuthRequired && !session.user) {
      this.metrics.refused('auth_required');
      return callback(new SmtpRefusal(530, 'auth_required', 'Authentication required: AUTH with a mail:ingest token.'));
    }
    const expired = this.guard.expiry(session);
    if (expired) return callback(this.refusal(expired));
    // A sender that says how large its message is learns at once that it would not fit now.
    const args = address.args as Record<string, string> | false;
    const declared = Number((args && args.SIZE) || 0);
    if (declared > 0 && !this.budget.fits(declared)) return callback(this.refusal(budgetSpent()));
    this.transactions.add(session.id);
    callback();
  }

  private async onRcptTo(
    address: SMTPServerAddress,
    session: SMTPServerSession,
    callback: (err?: Error | null) => void,
  ): Promise<void> {
    let mailboxId: string;
    try {
      mailboxId = await this.inbound.recipientMailbox(address.address, session.user as Caller | undefined);
    } catch (err) {
      return callback(this.refusal(this.guard.judge(session, err)));
    }
    const mailboxes = this.recipients.get(session.envelope) ?? new Set<string>();
    mailboxes.add(mailboxId);
    this.recipients.set(session.envelope, mailboxes);
    callback();
  }

  /**
   * Stores the message as it streams in (see MessageIntake: the size limit and the budget of bytes
   * in flight) and answers after the commit. A client that leaves mid-DATA fails the stream: nothing
   * stored, nothing left waiting. A session ended meanwhile (its token revoked) stores nothing that
   * is not committing yet.
   */
  private onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback: DataCallback): void {
    const intake = new MessageIntake(stream, this.budget, this.finishing, this.relief, this.maxMessageBytes);
    const mailboxIds = [...(this.recipients.get(session.envelope) ?? [])];
    const mailFrom = session.envelope.mailFrom;
    const delivery = this.inbound
      .deliver(
        intake.body,
        mailboxIds,
        {
          ip: session.remoteAddress,
          helo: session.hostNameAppearsAs || '',
          mailFrom: mailFrom ? mailFrom.address : '',
        },
        { signal: this.guard.deliveryStarted(session), parsed: () => intake.parsed() },
      )
      .then(
        (stored) => {
          const fresh = stored.filter((s) => !s.duplicate).length;
          this.metrics.accepted(fresh > 0 ? 'stored' : 'duplicate');
          callback(
            null,
            fresh > 0
              ? `Accepted: stored in ${fresh} mailbox${fresh === 1 ? '' : 'es'}`
              : 'Accepted: already stored (same Message-ID)',
          );
        },
        (err: unknown) => callback(this.refusal(intake.refused ?? err)),
      )
      .finally(() => {
        intake.release();
        this.guard.deliveryEnded(session);
        this.deliveries.delete(delivery);
        this.endTransaction(session.id);
      });
    this.deliveries.add(delivery);
  }

  /** Counts a refusal; anything unexpected becomes a temporary failure (the sender retries). */
  private refusal(err: unknown): SmtpRefusal {
    if (err instanceof SmtpRefusal) {
      this.metrics.refused(err.reason);
      return err;
    }
    this.logger.error({ component: 'smtp', err: { message: (err as Error)?.message } }, 'SMTP command failed');
    this.metrics.refused('storage_error');
    return new SmtpRefusal(451, 'storage_error', 'Local error in processing; try again later.');
  }

  private endTransaction(sessionId: string): void {
    if (!this.transactions.delete(sessionId) || this.transactions.size > 0) return;
    for (const resolve of this.whenNoTransactions.splice(0)) resolve();
  }

  /** SIGTERM: refuse new sessions and transactions, let those in flight finish within the budget. */
  private async drain(): Promise<void> {
    if (!this.server) return;
    this.draining = true;
    if (this.transactions.size === 0) return;
    const budgetMs = this.config.shutdownGraceMs * DRAIN_SHARE_OF_GRACE;
    this.logger.info({ component: 'smtp', transactions: this.transactions.size, budget_ms: budgetMs }, 'SMTP draining');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, budgetMs);
      this.whenNoTransactions.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Tells every session left to go (421), closes the listener, and waits for deliveries being stored. */
  private async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    this.draining = true;
    this.guard.watch(undefined);
    for (const connection of server.connections) connection.send(421, SHUTTING_DOWN, false);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await Promise.allSettled([...this.deliveries]);
  }
}
