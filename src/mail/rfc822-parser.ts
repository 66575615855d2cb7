import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AddressObject, AttachmentStream, Headers, MailParser, MessageText } from 'mailparser';
import { invalidRequest } from '../kernel/errors';
import { deliveryReportOf, ReportPart, REPORT_PART_TYPES } from './delivery-report';
import { InboundMessage, repairedInbound } from './inbound-message';
import { HeaderBlockBounder } from './rfc822-header-block';

/**
 * How much of a report part (delivery status, returned headers) is kept for reading the report:
 * its fields come first, and a returned `message/rfc822` part can be a whole message.
 */
const REPORT_PART_MAX_BYTES = 256 * 1024;

/**
 * HTML longer than this (in characters) is not converted to text for a message without a text part:
 * the converter builds a tree of the whole document, many times its size. The HTML is still stored.
 */
const HTML_TO_TEXT_MAX_LENGTH = 2 * 1024 * 1024;

function addresses(field: unknown): string[] {
  const object = field as AddressObject | AddressObject[] | undefined;
  const groups = object === undefined ? [] : Array.isArray(object) ? object : [object];
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

function messageIds(value: unknown): string[] {
  if (typeof value !== 'string' && !Array.isArray(value)) return [];
  return (Array.isArray(value) ? (value as string[]) : value.split(/\s+/))
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
}

function headerText(headers: Headers, name: string): string | null {
  const value = headers.get(name);
  return typeof value === 'string' ? value : null;
}

/** RFC 3834 section 2 and the older `Precedence` convention: was the message sent by a machine? */
function isAutomatic(headers: Headers): boolean {
  const keyword = (name: string) => headerText(headers, name)?.split(';')[0].trim().toLowerCase();
  const submitted = keyword('auto-submitted');
  return (
    (submitted !== undefined && submitted !== 'no') || /^(bulk|junk|list|auto_reply)$/.test(keyword('precedence') ?? '')
  );
}

/** What the parser hands over: the headers, the text content, and the parts a delivery report needs. */
interface ParsedParts {
  headers: Headers;
  text: MessageText | undefined;
  reportParts: ReportPart[];
  bytes: number;
}

/**
 * Parses a raw RFC 5322 message (MIME, encodings, charsets) into the fields Alcarta keeps, with
 * what PostgreSQL cannot store (NUL, lone surrogates, e.g. from a UTF-16 encoded word) replaced.
 * A header block too large for the parser is cut first (see rfc822-header-block.ts).
 *
 * The message may be a stream (SMTP DATA as it arrives): it is parsed as it streams, and only what
 * Alcarta keeps is held (the header fields, the text and HTML parts, the start of a delivery
 * report's parts); attachments are read and dropped. A stream that fails (the client left, the
 * receiver gave up on the message) rejects with its own error: the message is not at fault.
 */
export async function parseRfc822(raw: Buffer | Readable): Promise<InboundMessage> {
  const { headers, text, reportParts, bytes } = await parseParts(Buffer.isBuffer(raw) ? Readable.from([raw]) : raw);
  if (bytes === 0) throw invalidRequest('empty_message', 'The message/rfc822 body is empty.');
  const from = addresses(headers.get('from'))[0];
  if (!from) throw invalidRequest('missing_from', 'The message has no From address.');
  const inReplyTo = headerText(headers, 'in-reply-to');
  const deliveryReport = deliveryReportOf(
    headers.get('content-type') as { value: string; params: Record<string, string> } | undefined,
    reportParts,
    inReplyTo,
  );
  // The text keeps the report's status fields for the agent reading it, as for any other report.
  const statusTexts = reportParts
    .filter((p) => /^message\/(global-)?delivery-status$/i.test(p.contentType))
    .map((p) => p.content.toString('utf8'));
  return repairedInbound({
    from,
    to: addresses(headers.get('to')),
    cc: addresses(headers.get('cc')),
    subject: headerText(headers, 'subject') ?? '',
    text: [text?.text ?? '', ...statusTexts].filter((t) => t.length > 0).join('\n'),
    html: typeof text?.html === 'string' ? text.html : null,
    messageIdHeader: headerText(headers, 'message-id')?.trim() || null,
    inReplyTo,
    references: messageIds(headers.get('references')),
    receivedAt: null,
    ...(deliveryReport && { deliveryReport }),
    ...(isAutomatic(headers) && { automatic: true }),
  });
}

async function parseParts(source: Readable): Promise<ParsedParts> {
  const bounder = new HeaderBlockBounder();
  const parser = new MailParser({
    skipTextToHtml: true,
    maxHtmlLengthToParse: HTML_TO_TEXT_MAX_LENGTH,
    // Nobody reads attachment checksums: no need to hash megabytes of them.
    checksumAlgo: false,
    // Delivery reports come as parts of their own (read below), not mixed into the text.
    keepDeliveryStatus: true,
  });
  // Which stream failed first: the others then fail with the same error.
  let failed: 'source' | 'parser' | undefined;
  source.once('error', () => (failed ??= 'source'));
  for (const stream of [bounder, parser]) stream.once('error', () => (failed ??= 'parser'));
  let headers: Headers = new Map();
  let text: MessageText | undefined;
  const reportParts: ReportPart[] = [];
  parser.once('headers', (parsed: Headers) => (headers = parsed));
  try {
    // MailParser is a Transform whose readable side holds objects, which its typing does not say.
    await pipeline(
      source,
      bounder,
      parser as unknown as Transform,
      async (parts: AsyncIterable<AttachmentStream | MessageText>) => {
        for await (const part of parts) {
          if (part.type === 'text') text = part;
          else await readAttachment(part, reportParts);
        }
      },
    );
  } catch (err) {
    if (failed !== 'parser') throw err;
    throw invalidRequest('unparseable_message', `The message could not be parsed: ${(err as Error).message}`);
  }
  return { headers, text, reportParts, bytes: bounder.bytes };
}

/**
 * Reads an attachment to its end (the parser waits for that) and lets it go; a part that a delivery
 * report is read from is added to `reportParts` with its first REPORT_PART_MAX_BYTES.
 */
async function readAttachment(attachment: AttachmentStream, reportParts: ReportPart[]): Promise<void> {
  const kept = REPORT_PART_TYPES.has(attachment.contentType.toLowerCase());
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of attachment.content as AsyncIterable<Buffer>) {
    if (!kept || length >= REPORT_PART_MAX_BYTES) continue;
    const taken = chunk.subarray(0, REPORT_PART_MAX_BYTES - length);
    chunks.push(taken);
    length += taken.length;
  }
  attachment.release?.();
  if (kept) reportParts.push({ contentType: attachment.contentType, content: Buffer.concat(chunks, length) });
}
