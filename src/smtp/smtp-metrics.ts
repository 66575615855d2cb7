import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import { RefusalReason } from './smtp-refusal';

/** SPEC 9 operations: SMTP sessions, and messages accepted or refused by reason. */
@Injectable()
export class SmtpMetrics {
  readonly sessionsActive: Gauge;
  readonly sessionsTotal: Counter;
  private readonly messages: Counter<'outcome' | 'reason'>;

  constructor(metrics: Metrics) {
    const registers = [metrics.registry];
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
  }

  accepted(reason: 'stored' | 'duplicate'): void {
    this.messages.inc({ outcome: 'accepted', reason });
  }

  refused(reason: RefusalReason): void {
    this.messages.inc({ outcome: 'refused', reason });
  }
}
