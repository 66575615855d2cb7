import { repairText, truncateChars, truncateUtf8 } from '../common/text-safety';
import { DeliveryReport } from './delivery-report';

/** An inbound email as ingest receives it, whether it came as JSON or as raw RFC 5322. */
export interface InboundMessage {
  from: string;
  to: string[];
  cc: string[];
  subject: string;
  text: string;
  html: string | null;
  messageIdHeader: string | null;
  inReplyTo: string | null;
  /** Message-IDs of the References header, oldest first; used to find the thread. */
  references: string[];
  receivedAt: Date | null;
  /** Set when the message is a delivery status notification (a bounce report, RFC 3464). */
  deliveryReport?: DeliveryReport;
  /**
   * Set when the message says a machine sent it (RFC 3834: `Auto-Submitted` other than `no`, or
   * `Precedence: bulk, junk, list or auto_reply`): nothing answers it automatically, so no mail loop.
   */
  automatic?: boolean;
}

/**
 * How much of an inbound message's header values is stored. Longer values are cut, never refused
 * (docs/operators.md, "Limits and hardening"): the headers are the sender's, and mail must not bounce for them.
 */
export const INBOUND_LIMITS = {
  /**
   * Message-ID, In-Reply-To and each References id, in bytes of UTF-8 (RFC 5322's line length).
   * The Message-ID is a btree key, whose rows PostgreSQL caps at 2,704 bytes. Every id is cut the
   * same way, so a reply naming a long Message-ID still finds its thread.
   */
  messageIdBytes: 998,
  /** References ids kept: the last ones, the nearest ancestors, which threading tries first. */
  references: 100,
  /** Subject, in UTF-16 code units (as for JSON ingest and send_email). */
  subjectLength: 2000,
  /** Each address, in UTF-16 code units (the longest valid address is 320 characters). */
  addressLength: 320,
  /** Addresses kept in To and in Cc each (as for JSON ingest). */
  recipients: 1000,
} as const;

/** The message with its header values cut to INBOUND_LIMITS. */
export function withinInboundLimits(message: InboundMessage): InboundMessage {
  const id = (value: string | null) => (value === null ? null : truncateUtf8(value, INBOUND_LIMITS.messageIdBytes));
  const addresses = (list: string[]) =>
    list.slice(0, INBOUND_LIMITS.recipients).map((a) => truncateChars(a, INBOUND_LIMITS.addressLength));
  return {
    ...message,
    from: truncateChars(message.from, INBOUND_LIMITS.addressLength),
    to: addresses(message.to),
    cc: addresses(message.cc),
    subject: truncateChars(message.subject, INBOUND_LIMITS.subjectLength),
    messageIdHeader: id(message.messageIdHeader),
    inReplyTo: id(message.inReplyTo),
    references: message.references.slice(-INBOUND_LIMITS.references).map((r) => id(r)!),
  };
}

/**
 * The message with every NUL and lone surrogate replaced by U+FFFD: raw mail is stored as the
 * sender wrote it, as far as PostgreSQL can hold it (docs/operators.md, "Limits and hardening").
 */
export function repairedInbound(message: InboundMessage): InboundMessage {
  const opt = (value: string | null) => (value === null ? null : repairText(value));
  return {
    ...message,
    from: repairText(message.from),
    to: message.to.map(repairText),
    cc: message.cc.map(repairText),
    subject: repairText(message.subject),
    text: repairText(message.text),
    html: opt(message.html),
    messageIdHeader: opt(message.messageIdHeader),
    inReplyTo: opt(message.inReplyTo),
    references: message.references.map(repairText),
  };
}
