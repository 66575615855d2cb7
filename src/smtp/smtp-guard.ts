import { Inject, Injectable } from '@nestjs/common';
import { Logger } from 'pino';
import { SMTPServer, SMTPServerSession } from 'smtp-server';
import type { SMTPConnection } from 'smtp-server/lib/smtp-connection.js';
import { Caller } from '../kernel/caller';
import { CredentialRepository } from '../auth/credential.repository';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { ROOT_LOGGER } from '../logging/logging.module';
import { Admission, GuessThrottle, MAX_FAILED_AUTHS, MAX_UNKNOWN_RECIPIENTS, Offence } from './guess-throttle';
import { SessionEndReason, SmtpMetrics } from './smtp-metrics';
import { SmtpRefusal } from './smtp-refusal';

/**
 * How long a revocation is remembered: an AUTH that read the token just before it but finishes just
 * after its doorbell is refused all the same. Token lookups end well within this (database timeouts).
 */
const REMEMBER_REVOKED_MS = 60_000;

/** What the guard keeps of a session. */
interface SessionState {
  address: string;
  failedAuths: number;
  unknownRecipients: number;
  /** Aborted when the session is ended mid-delivery: what is not committing yet is not stored. */
  delivery?: AbortController;
}

/**
 * Who may keep talking to the SMTP listener:
 *  - guesses are throttled: a session is ended (421) after MAX_FAILED_AUTHS failed AUTH attempts or
 *    MAX_UNKNOWN_RECIPIENTS unknown recipients, and later sessions of the same client are slowed
 *    (GuessThrottle);
 *  - a session authenticated with a token ends (421) as soon as the token is revoked, on every
 *    replica (the `credential_revoked` doorbell), or at its next transaction once it has expired.
 *    After a lost doorbell (the listener reconnected) the tokens of all sessions are read again.
 * SMTP AUTH takes static tokens only (InboundMailService.authenticate), so there is no OAuth
 * principal to follow: a deleted grant gives no SMTP session its mailboxes.
 */
@Injectable()
export class SmtpGuard implements DoorbellSubscriber {
  private readonly throttle = new GuessThrottle();
  private readonly states = new WeakMap<SMTPServerSession, SessionState>();
  /** Token id → when its revocation rang here (see REMEMBER_REVOKED_MS). */
  private readonly revoked = new Map<string, number>();
  private server: SMTPServer | undefined;

  constructor(
    private readonly metrics: SmtpMetrics,
    private readonly credentials: CredentialRepository,
    listener: DoorbellListener,
    @Inject(ROOT_LOGGER) private readonly logger: Logger,
  ) {
    listener.subscribe(this);
  }

  get throttledClients(): number {
    return this.throttle.remembered;
  }

  /** The listener whose sessions a revocation ends (undefined once it closes). */
  watch(server: SMTPServer | undefined): void {
    this.server = server;
  }

  /** Whether a new session may start, and after how long a wait for its greeting. */
  admit(session: SMTPServerSession): { delayMs: number } | { refused: SmtpRefusal } {
    const admission: Admission = this.throttle.admit(session.remoteAddress);
    if ('refused' in admission) {
      this.metrics.sessionEnded('too_many_sessions');
      return {
        refused: new SmtpRefusal(421, 'throttled', '4.7.0 Too many sessions from your address; try again later'),
      };
    }
    this.states.set(session, { address: session.remoteAddress, failedAuths: 0, unknownRecipients: 0 });
    if (admission.delayMs > 0) this.metrics.sessionSlowed();
    return admission;
  }

  closed(session: SMTPServerSession): void {
    const state = this.states.get(session);
    if (!state) return;
    this.states.delete(session);
    this.throttle.closed(state.address);
  }

  /**
   * The refusal a failed AUTH or RCPT TO gets: as it was, or, for the guess that uses up the
   * session's allowance, a 421 that ends the session. Every wrong guess counts against the client.
   */
  judge(session: SMTPServerSession, err: unknown): unknown {
    const state = this.states.get(session);
    if (!state || !(err instanceof SmtpRefusal)) return err;
    if (err.reason === 'auth_failed') {
      return this.guessed(state, 'failed_auth', ++state.failedAuths >= MAX_FAILED_AUTHS, err, 'failed_auths');
    }
    if (err.reason === 'unknown_recipient') {
      const spent = ++state.unknownRecipients >= MAX_UNKNOWN_RECIPIENTS;
      return this.guessed(state, 'unknown_recipient', spent, err, 'unknown_recipients');
    }
    return err;
  }

  /** `caller`, unless a revocation of its token rang after its token was read (then AUTH fails). */
  stillValid(caller: Caller): Caller {
    const revokedAt = this.revoked.get(caller.tokenId);
    if (revokedAt !== undefined && caller.authenticatedAt <= revokedAt) {
      throw new SmtpRefusal(535, 'auth_failed', 'Authentication failed: the password must be a mail:ingest token.');
    }
    return caller;
  }

  /** The refusal that ends a session whose token has expired since it authenticated, if it has. */
  expiry(session: SMTPServerSession): SmtpRefusal | undefined {
    const caller = session.user as Caller | undefined;
    if (!caller?.expiresAt || caller.expiresAt.getTime() > Date.now()) return undefined;
    this.metrics.sessionEnded('credential_expired');
    return new SmtpRefusal(421, 'credential_expired', '4.7.0 The token has expired; closing the session');
  }

  /** A delivery of the session starts: the signal aborts if the session is ended before it is stored. */
  deliveryStarted(session: SMTPServerSession): AbortSignal {
    const controller = new AbortController();
    const state = this.states.get(session);
    if (state) state.delivery = controller;
    return controller.signal;
  }

  deliveryEnded(session: SMTPServerSession): void {
    const state = this.states.get(session);
    if (state) state.delivery = undefined;
  }

  onDoorbell(bell: Doorbell): void {
    if (bell.kind === 'credential_revoked') this.endSessionsOf(bell.tokenId);
  }

  /** Revocations may have rung while the listener was away: the tokens of every session are read again. */
  onListenerReconnected(): void {
    const tokenIds = [...this.authenticated()].map(([, caller]) => caller.tokenId);
    if (tokenIds.length === 0) return;
    this.credentials.usable(tokenIds).then(
      (usable) => {
        for (const tokenId of tokenIds) if (!usable.has(tokenId)) this.endSessionsOf(tokenId);
      },
      (err: Error) =>
        this.logger.warn({ component: 'smtp', err: { message: err.message } }, 'SMTP could not re-read session tokens'),
    );
  }

  private guessed(
    state: SessionState,
    offence: Offence,
    spent: boolean,
    refusal: SmtpRefusal,
    reason: SessionEndReason,
  ): SmtpRefusal {
    this.throttle.offence(state.address, offence);
    if (!spent) return refusal;
    this.throttle.offence(state.address, 'closed');
    this.metrics.sessionEnded(reason);
    const what = reason === 'failed_auths' ? 'failed authentication attempts' : 'unknown recipients';
    return new SmtpRefusal(421, refusal.reason, `4.7.0 Too many ${what}; closing the session`);
  }

  /** Ends (421) every session authenticated with `tokenId` before now; the revocation is remembered. */
  private endSessionsOf(tokenId: string): void {
    const now = Date.now();
    this.revoked.set(tokenId, now);
    for (const [id, at] of this.revoked) if (at < now - REMEMBER_REVOKED_MS) this.revoked.delete(id);
    for (const [connection, caller] of this.authenticated()) {
      if (caller.tokenId !== tokenId || caller.authenticatedAt > now) continue;
      const ended = new SmtpRefusal(421, 'credential_revoked', '4.7.0 The token was revoked; closing the session');
      this.states.get(connection.session)?.delivery?.abort(ended);
      connection.send(421, ended.message);
      this.metrics.sessionEnded('credential_revoked');
    }
  }

  /** The open sessions that authenticated, with their callers. */
  private *authenticated(): Generator<[SMTPConnection, Caller]> {
    for (const connection of this.server?.connections ?? []) {
      const caller = connection.session.user as Caller | undefined;
      if (caller) yield [connection, caller];
    }
  }
}
