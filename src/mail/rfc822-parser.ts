import { AddressObject, simpleParser } from 'mailparser';
import { invalidRequest } from '../common/errors';
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
    });
  } catch (err) {
    throw invalidRequest('unparseable_message', `The message could not be parsed: ${(err as Error).message}`);
  }
  const from = addresses(parsed.from)[0];
  if (!from) throw invalidRequest('missing_from', 'The message has no From address.');
  return repairedInbound({
    from,
    to: addresses(parsed.to),
    cc: addresses(parsed.cc),
    subject: parsed.subject ?? '',
    text: parsed.text ?? '',
    html: typeof parsed.html === 'string' ? parsed.html : null,
    messageIdHeader: parsed.messageId?.trim() || null,
    inReplyTo: parsed.inReplyTo ?? null,
    references: messageIds(parsed.references),
    receivedAt: null,
  });
}
