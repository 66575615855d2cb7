/** Why the SMTP server refused something: the label of `alcarta_smtp_messages_total{outcome="refused"}`. */
export type RefusalReason =
  | 'unknown_recipient'
  | 'too_large'
  | 'unparseable'
  | 'database_unavailable'
  | 'storage_error'
  | 'auth_required'
  | 'auth_failed'
  | 'shutting_down'
  | 'server_busy'
  | 'throttled'
  | 'credential_revoked'
  | 'credential_expired';

/**
 * An SMTP reply that refuses a command, as smtp-server sends it: `responseCode` is the reply code,
 * and smtp-server adds the enhanced status code of that reply code (550 → 5.1.1, 451 → 4.3.0,
 * 554 → 5.6.0, 535 → 5.7.8, 530 → 5.7.0) unless the message starts with one of its own (see
 * SmtpListener), e.g. `4.3.1 …`.
 */
export class SmtpRefusal extends Error {
  constructor(
    readonly responseCode: number,
    readonly reason: RefusalReason,
    message: string,
  ) {
    super(message);
    this.name = 'SmtpRefusal';
  }
}
