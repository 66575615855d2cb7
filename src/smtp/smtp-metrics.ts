import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import { RefusalReason } from './smtp-refusal';

/** Why the server ended a session with 421 before its client did (besides shutting down). */
export type SessionEndReason =
  'failed_auths' | 'unknown_recipients' | 'too_many_sessions' | 'credential_revoked' | 'credential_expired';

/** The listener's state that gauges read at scrape time. */
export interface LiveSmtpState {
  bytesInFlight(): number;
  throttledClients(): number;
}

/**
 * Inbound SMTP operations: sessions, messages accepted or refused by reason, the bytes of messages
 * in flight, and the throttling of guesses (sessions ended or slowed, clients remembered).
 */
@Injectable()
export class SmtpMetrics {
  readonly sessionsActive: Gauge;
  readonly sessionsTotal: Counter;
  private readonly messages: Counter<'outcome' | 'reason'>;
  private readonly sessionsEnded: Counter<'reason'>;
  private readonly sessionsSlowed: Counter;
  private live: LiveSmtpState | undefined;

  constructor(metrics: Metrics) {
    const registers = [metrics.registry];
    const live = () => this.live;
    this.sessionsActive = new Gauge({
      name: 'alcarta_smtp_sessions_active',
      help: 'Inbound SMTP sessions open right now.',
      registers,
    });
    this.sessionsTotal = new Counter({
      name: 'alcarta_smtp_sessions_total',
      help: 'Inbound SMTP sessions accepted since start (refused connections not included).',
      registers,
    });
    this.messages = new Counter({
      name: 'alcarta_smtp_messages_total',
      help:
        'Inbound SMTP messages: outcome "accepted" (reason "stored" or "duplicate") or "refused" by reason. ' +
        'A refused RCPT TO counts once per recipient (reason "unknown_recipient").',
      labelNames: ['outcome', 'reason'],
      registers,
    });
    this.sessionsEnded = new Counter({
      name: 'alcarta_smtp_sessions_ended_total',
      help:
        'Inbound SMTP sessions the server ended with 421, by reason: "failed_auths", "unknown_recipients" ' +
        '(too many guesses), "too_many_sessions" (a slowed client opening more), "credential_revoked", ' +
        '"credential_expired".',
      labelNames: ['reason'],
      registers,
    });
    this.sessionsSlowed = new Counter({
      name: 'alcarta_smtp_sessions_slowed_total',
      help: 'Inbound SMTP sessions whose greeting was delayed because their client guessed wrong too often.',
      registers,
    });
    new Gauge({
      name: 'alcarta_smtp_bytes_in_flight',
      help: 'Bytes of inbound SMTP messages being received, parsed or stored (see ALCARTA_SMTP_MAX_BYTES_IN_FLIGHT).',
      registers,
      collect() {
        this.set(live()?.bytesInFlight() ?? 0);
      },
    });
    new Gauge({
      name: 'alcarta_smtp_throttled_clients',
      help: 'Client addresses (IPv6: /64 networks) the guess throttle remembers for their recent wrong guesses.',
      registers,
      collect() {
        this.set(live()?.throttledClients() ?? 0);
      },
    });
  }

  /** Where the gauges read at scrape time come from: the listener's budget and throttle. */
  observe(live: LiveSmtpState): void {
    this.live = live;
  }

  accepted(reason: 'stored' | 'duplicate'): void {
    this.messages.inc({ outcome: 'accepted', reason });
  }

  refused(reason: RefusalReason): void {
    this.messages.inc({ outcome: 'refused', reason });
  }

  sessionEnded(reason: SessionEndReason): void {
    this.sessionsEnded.inc({ reason });
  }

  sessionSlowed(): void {
    this.sessionsSlowed.inc();
  }
}
