/**
 * Delivery status notifications (RFC 3464): the `multipart/report; report-type=delivery-status`
 * message a relay or the recipient's server sends back when it could not deliver a message. The
 * outbox reads them to mark the message it sent `bounced`.
 */
export interface DeliveryReport {
  /**
   * The Message-ID (with angle brackets) of the message the report is about: from the returned
   * headers (`text/rfc822-headers` or `message/rfc822` part), else the envelope id or the report's
   * own In-Reply-To. Null when the report names none.
   */
  originalMessageId: string | null;
  /** One entry per recipient the report speaks of. */
  recipients: DeliveryReportRecipient[];
}

export interface DeliveryReportRecipient {
  /** `Final-Recipient` without its address type, e.g. `someone@example.org`. */
  recipient: string | null;
  /** `failed`, `delayed`, `delivered`, `relayed` or `expanded` (lower-case). */
  action: string;
  /** The enhanced status code, e.g. `5.1.1`. */
  status: string | null;
  /** The remote server's words, e.g. `smtp; 550 5.1.1 User unknown`. */
  diagnostic: string | null;
}

/** A MIME part of the report as the parser hands it over. */
export interface ReportPart {
  contentType: string;
  content: Buffer;
}

const STATUS_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const RETURNED_HEADER_TYPES = new Set(['text/rfc822-headers', 'message/rfc822', 'message/global-headers']);
/** The content types of the parts a report is read from (lower-case): the parser keeps only these. */
export const REPORT_PART_TYPES: ReadonlySet<string> = new Set([...STATUS_TYPES, ...RETURNED_HEADER_TYPES]);
/** A report lists few recipients; a hostile one must not cost much. */
const MAX_RECIPIENTS = 100;
const MAX_FIELD_LENGTH = 1000;

/**
 * The delivery report carried by a message whose top-level type is `multipart/report` with
 * `report-type=delivery-status`, or null for any other message (including other reports, e.g.
 * read receipts). `inReplyTo` is the report's own In-Reply-To header (a fallback some MTAs set).
 */
export function deliveryReportOf(
  contentType: { value: string; params: Record<string, string> } | undefined,
  parts: readonly ReportPart[],
  inReplyTo: string | null,
): DeliveryReport | null {
  if (contentType?.value.toLowerCase() !== 'multipart/report') return null;
  if (contentType.params['report-type']?.toLowerCase() !== 'delivery-status') return null;
  const statusPart = parts.find((p) => STATUS_TYPES.has(p.contentType.toLowerCase()));
  if (!statusPart) return null;
  const [perMessage = new Map<string, string>(), ...perRecipient] = headerBlocks(statusPart.content.toString('utf8'));
  const recipients = perRecipient
    .filter((fields) => fields.has('action'))
    .slice(0, MAX_RECIPIENTS)
    .map((fields) => ({
      recipient: withoutAddressType(fields.get('final-recipient') ?? fields.get('original-recipient')),
      action: fields.get('action')!.toLowerCase(),
      status: fields.get('status') ?? null,
      diagnostic: fields.get('diagnostic-code') ?? null,
    }));
  const returned = parts.find((p) => RETURNED_HEADER_TYPES.has(p.contentType.toLowerCase()));
  const returnedId = returned ? headerBlocks(returned.content.toString('utf8'), 1)[0]?.get('message-id') : undefined;
  const originalMessageId =
    bracketedMessageId(returnedId) ??
    bracketedMessageId(perMessage.get('original-envelope-id')) ??
    bracketedMessageId(inReplyTo ?? undefined);
  return { originalMessageId, recipients };
}

/**
 * The header blocks of `text` (blocks separated by empty lines), each as lower-case field name →
 * unfolded value (the first occurrence wins). `limit` stops after that many blocks.
 */
function headerBlocks(text: string, limit = MAX_RECIPIENTS + 1): Map<string, string>[] {
  const blocks: Map<string, string>[] = [];
  let current: Map<string, string> | undefined;
  let lastName: string | undefined;
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') {
      if (current) blocks.push(current);
      if (blocks.length >= limit) return blocks;
      current = undefined;
      lastName = undefined;
      continue;
    }
    current ??= new Map<string, string>();
    if (/^[ \t]/.test(line)) {
      if (lastName && current.has(lastName)) {
        current.set(lastName, cut(`${current.get(lastName)} ${line.trim()}`));
      }
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    lastName = line.slice(0, colon).trim().toLowerCase();
    if (!current.has(lastName)) current.set(lastName, cut(line.slice(colon + 1).trim()));
    else lastName = undefined;
  }
  if (current && blocks.length < limit) blocks.push(current);
  return blocks;
}

function cut(value: string): string {
  return value.length > MAX_FIELD_LENGTH ? value.slice(0, MAX_FIELD_LENGTH) : value;
}

/** `rfc822; someone@example.org` → `someone@example.org`. */
function withoutAddressType(value: string | undefined): string | null {
  if (!value) return null;
  const semicolon = value.indexOf(';');
  return (semicolon === -1 ? value : value.slice(semicolon + 1)).trim() || null;
}

/**
 * A Message-ID as Alcarta stores it (`<local@domain>`), or null when `value` is not one (a NUL,
 * which PostgreSQL cannot compare, is not one either).
 */
function bracketedMessageId(value: string | undefined): string | null {
  if (!value || value.includes('\u0000')) return null;
  const match = /^<?([^<>\s@]+@[^<>\s]+?)>?$/.exec(value.trim());
  return match ? `<${match[1]}>` : null;
}
