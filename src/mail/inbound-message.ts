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
}
