import { Transform, TransformCallback } from 'node:stream';

/**
 * mailparser refuses a message whose header block costs more than 1 MiB (every line counts at least
 * 64 bytes), but over-long headers of inbound mail are stored cut, never refused
 * (docs/operators.md, "Limits and hardening"). So a header block above half that cost is rewritten
 * before parsing, to what Alcarta reads:
 *  - the first of each field Alcarta uses (From, To, Cc, Subject, Message-ID, In-Reply-To,
 *    References, Date, MIME-Version, Content-*) is always kept, then other fields in order while
 *    the budget lasts;
 *  - each kept field is unfolded and cut to FIELD_MAX_LENGTH characters; References keeps its end
 *    (the nearest ancestors, which threading tries first) from an id boundary, the others their start.
 * Header blocks below the threshold, i.e. all ordinary mail, reach the parser untouched. Bytes are
 * handled as latin1, one character per byte, so raw 8-bit headers pass through unchanged.
 */
const PARSER_LINE_MIN_COST = 64;
const REWRITE_ABOVE_COST = 512 * 1024;
const FIELD_MAX_LENGTH = 16 * 1024;
const ESSENTIAL_FIELDS = new Set([
  'from',
  'to',
  'cc',
  'subject',
  'message-id',
  'in-reply-to',
  'references',
  'date',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'content-disposition',
]);

const cost = (length: number) => Math.max(length + 2, PARSER_LINE_MIN_COST);

export function withBoundedHeaderBlock(raw: Buffer): Buffer {
  const text = raw.toString('latin1');
  // The header block ends at the first empty line (or the end of the message).
  const separator = /^\r?\n|\r?\n\r?\n/.exec(text);
  const end = separator ? separator.index : text.length;
  let total = 0;
  for (const [from, to] of lines(text, end)) total += cost(to - from);
  if (total <= REWRITE_ABOVE_COST) return raw;

  // Two passes over the fields, holding only what is kept: a header block can be 25 MiB of lines.
  const kept = new Map<number, string>();
  const seen = new Set<string>();
  let used = 0;
  for (const [from, to] of fields(text, end)) {
    const name = nameOf(text, from, to);
    if (!ESSENTIAL_FIELDS.has(name) || seen.has(name)) continue;
    seen.add(name);
    const field = cut(unfold(text.slice(from, to)), name);
    kept.set(from, field);
    used += cost(field.length);
  }
  for (const [from, to] of fields(text, end)) {
    if (kept.has(from)) continue;
    if (used + PARSER_LINE_MIN_COST > REWRITE_ABOVE_COST) break;
    const field = cut(unfold(text.slice(from, Math.min(to, from + 2 * FIELD_MAX_LENGTH))), nameOf(text, from, to));
    if (used + cost(field.length) > REWRITE_ABOVE_COST) continue;
    kept.set(from, field);
    used += cost(field.length);
  }
  const header = [...kept.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, field]) => field)
    .join('\r\n');
  return Buffer.from(header + text.slice(end), 'latin1');
}

/**
 * The unfolded values of every `name` field (case-insensitive) in the header block of `raw` (a
 * message, or its header block alone), top to bottom, without the leading and trailing white space.
 */
export function headerFieldValues(raw: Buffer | string, name: string): string[] {
  const text = typeof raw === 'string' ? raw : raw.toString('latin1');
  const separator = /^\r?\n|\r?\n\r?\n/.exec(text);
  const end = separator ? separator.index : text.length;
  const wanted = name.toLowerCase();
  const values: string[] = [];
  for (const [from, to] of fields(text, end)) {
    if (nameOf(text, from, to) !== wanted) continue;
    const field = unfold(text.slice(from, to));
    values.push(field.slice(field.indexOf(':') + 1).trim());
  }
  return values;
}

/**
 * withBoundedHeaderBlock for a message that streams in: holds the header block until it ends (the
 * first empty line, or the end of the message), passes it on (rewritten if it has to be), then
 * passes the body through untouched. `bytes` counts what came in.
 */
export class HeaderBlockBounder extends Transform {
  bytes = 0;
  private held: Buffer[] | undefined = [];
  /**
   * The last bytes seen (at most two), to find an empty line that straddles chunks. It starts as a
   * line break: a message that starts with an empty line has an empty header block.
   */
  private tail = Buffer.from('\n');

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (!this.held) return callback(null, chunk);
    const window = Buffer.concat([this.tail, chunk]);
    const end = emptyLineEnd(window);
    if (end === -1) {
      this.held.push(chunk);
      this.tail = window.subarray(-2);
      return callback();
    }
    const cut = end - this.tail.length;
    this.held.push(chunk.subarray(0, cut));
    this.releaseHeaderBlock();
    callback(null, chunk.length > cut ? chunk.subarray(cut) : undefined);
  }

  override _flush(callback: TransformCallback): void {
    if (this.held) this.releaseHeaderBlock();
    callback();
  }

  private releaseHeaderBlock(): void {
    const block = Buffer.concat(this.held!);
    this.held = undefined;
    if (block.length > 0) this.push(withBoundedHeaderBlock(block));
  }
}

/** Where the first empty line of `data` ends (just past its line break), or -1. */
function emptyLineEnd(data: Buffer): number {
  for (let i = data.indexOf(0x0a); i !== -1 && i + 1 < data.length; i = data.indexOf(0x0a, i + 1)) {
    if (data[i + 1] === 0x0a) return i + 2;
    if (data[i + 1] === 0x0d && data[i + 2] === 0x0a) return i + 3;
  }
  return -1;
}

/** The lines of text[0, end), as [start, end) without their line break. */
function* lines(text: string, end: number): Generator<[number, number]> {
  for (let from = 0; from < end;) {
    const newline = text.indexOf('\n', from);
    const to = newline === -1 || newline > end ? end : newline;
    yield [from, to > from && text[to - 1] === '\r' ? to - 1 : to];
    from = to + 1;
  }
}

/** The fields of text[0, end): a line and the continuation lines (starting with a space or tab) after it. */
function* fields(text: string, end: number): Generator<[number, number]> {
  let start = -1;
  let last = 0;
  for (const [from, to] of lines(text, end)) {
    const continues = text[from] === ' ' || text[from] === '\t';
    if (start >= 0 && !continues) {
      yield [start, last];
      start = from;
    } else if (start < 0) {
      start = from;
    }
    last = to;
  }
  if (start >= 0) yield [start, last];
}

/** The field's name, lower-case; '' for a line without a colon (field names are short). */
function nameOf(text: string, from: number, to: number): string {
  const head = text.slice(from, Math.min(to, from + 256));
  const colon = head.indexOf(':');
  return colon === -1 ? '' : head.slice(0, colon).trim().toLowerCase();
}

function unfold(field: string): string {
  return field.replace(/\r?\n(?=[ \t])/g, '');
}

function cut(field: string, name: string): string {
  if (field.length <= FIELD_MAX_LENGTH) return field;
  if (name !== 'references') return field.slice(0, FIELD_MAX_LENGTH);
  const tail = field.slice(-FIELD_MAX_LENGTH);
  return `References: ${tail.slice(tail.search(/\s/) + 1).trimStart()}`;
}
