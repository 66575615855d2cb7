import type Mail from 'nodemailer/lib/mailer';

/** The stored outbound message, as far as composing its mail needs it. */
export interface OutboundMessageFields {
  from: string;
  to: string[];
  cc: string[];
  subject: string;
  text: string;
  html: string | null;
  /** `<id@domain>`, Alcarta's own, the same on every attempt. */
  messageIdHeader: string | null;
  inReplyTo: string | null;
  /** The thread's Message-IDs, oldest first (the parent's References and the parent). */
  references: string[];
  /** When the message was recorded (approved): its `Date`, the same on every attempt. */
  receivedAt: Date;
  /** RFC 3834's `Auto-Submitted`, for mail a machine writes in answer to mail (approval reply answers). */
  autoSubmitted?: 'auto-replied';
}

export interface DkimSigning {
  selector: string;
  /** PEM. */
  privateKey: string;
}

/** The domain of an address (what DKIM signs for), lower-case. */
export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase();
}

/**
 * The mail for one delivery attempt. Everything that identifies it is taken from the stored message,
 * so every retry produces the same message (same Message-ID and Date): a recipient that got it twice
 * (at-least-once) sees one message. Replies carry In-Reply-To and References so the thread continues.
 * The envelope goes from the mailbox to every To and Cc recipient; with `dkim`, the mail is signed
 * for the mailbox's domain.
 */
export function composeOutboundMail(message: OutboundMessageFields, dkim?: DkimSigning): Mail.Options {
  return {
    from: message.from,
    to: message.to,
    ...(message.cc.length > 0 && { cc: message.cc }),
    subject: message.subject,
    text: message.text,
    ...(message.html !== null && { html: message.html }),
    date: message.receivedAt,
    ...(message.messageIdHeader && { messageId: message.messageIdHeader }),
    ...(message.inReplyTo && { inReplyTo: message.inReplyTo }),
    ...(message.references.length > 0 && { references: message.references }),
    envelope: { from: message.from, to: [...message.to, ...message.cc] },
    ...(message.autoSubmitted && { headers: { 'Auto-Submitted': message.autoSubmitted } }),
    ...(dkim && {
      dkim: { domainName: domainOf(message.from), keySelector: dkim.selector, privateKey: dkim.privateKey },
    }),
    // Nothing from the machine that sends it: the mail is the mailbox's.
    xMailer: false,
  };
}
