import { AddressObject, simpleParser } from 'mailparser';
import { invalidRequest } from '../common/errors';
import { deliveryReportOf } from './delivery-report';
import { InboundMessage, repairedInbound } from './inbound-message';
import { withBoundedHeaderBlock } from './rfc822-header-block';

function addresses(field: AddressObject | AddressObject[] | undefined): string[] {
  const groups = field === undefined ? [] : Array.isArray(field) ? field : [field];
  const out: string[] = [];
  const visit = (entries: AddressObject['value']) => {
    for (const entry of entries) {
      if (entry.address) out.push(entry.address);
      if (entry.group) visit(entry.group);
    }
  };
  for (const group of groups) visit(group.value);
  return out;
}

function messageIds(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : value.split(/\s+/)).map((v) => v.trim()).filter((v) => v.length > 0);
}

/**
 * Parses a raw RFC 5322 message (MIME, encodings, charsets) into the fields Alcarta keeps, with
 * what PostgreSQL cannot store (NUL, lone surrogates, e.g. from a UTF-16 encoded word) replaced.
 * A header block too large for the parser is cut first (see rfc822-header-block.ts).
 */
export async function parseRfc822(raw: Buffer): Promise<InboundMessage> {
  if (raw.length === 0) throw invalidRequest('empty_message', 'The message/rfc822 body is empty.');
  let parsed;
  try {
    parsed = await simpleParser(withBoundedHeaderBlock(raw), {
      skipImageLinks: true,
      skipTextToHtml: true,
      keepCidLinks: true,
      // Delivery reports come as parts of their own (read below), not mixed into the text.
      keepDeliveryStatus: true,
    });
  } catch (err) {
    throw invalidRequest('unparseable_message', `The message could not be parsed: ${(err as Error).message}`);
  }
  const from = addresses(parsed.from)[0];
  if (!from) throw invalidRequest('missing_from', 'The message has no From address.');
  const inReplyTo = parsed.inReplyTo ?? null;
  const deliveryReport = deliveryReportOf(
    parsed.headers.get('content-type') as { value: string; params: Record<string, string> } | undefined,
    parsed.attachments,
    inReplyTo,
  );
  // The text keeps the report's status fields for the agent reading it, as for any other report.
  const statusTexts = parsed.attachments
    .filter((a) => /^message\/(global-)?delivery-status$/i.test(a.contentType))
    .map((a) => a.content.toString('utf8'));
  return repairedInbound({
    from,
    to: addresses(parsed.to),
    cc: addresses(parsed.cc),
    subject: parsed.subject ?? '',
    text: [parsed.text ?? '', ...statusTexts].filter((t) => t.length > 0).join('\n'),
    html: typeof parsed.html === 'string' ? parsed.html : null,
    messageIdHeader: parsed.messageId?.trim() || null,
    inReplyTo,
    references: messageIds(parsed.references),
    receivedAt: null,
    ...(deliveryReport && { deliveryReport }),
  });
}
