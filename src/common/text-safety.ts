import { AlcartaError, invalidRequest } from '../kernel/errors';

/**
 * Text PostgreSQL cannot store, and JSON too deep to handle safely (docs/operators.md, "Limits and
 * hardening"). PostgreSQL refuses the NUL character in `text` and `jsonb`, and a lone UTF-16
 * surrogate either breaks `jsonb` (JSON.stringify writes it as a `\ud800` escape) or is silently
 * turned into U+FFFD on its way to `text`. JSON input (REST bodies, MCP arguments) containing
 * either is refused; inbound mail, whose bytes are the sender's, is repaired instead.
 *
 * Every walk here is iterative: a body nested 100,000 deep must not overflow the stack.
 */

/** Deepest nesting of arrays and objects accepted in a JSON request body (and so in MCP arguments). */
export const MAX_JSON_DEPTH = 64;

/** A NUL, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one. */
const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

export function hasUnstorableText(value: string): boolean {
  return UNSTORABLE.test(value);
}

/** The text with every NUL and lone surrogate replaced by U+FFFD (the replacement character). */
export function repairText(value: string): string {
  return UNSTORABLE.test(value) ? value.replace(UNSTORABLE_ALL, '\uFFFD') : value;
}

export type JsonProblem =
  /** A string value or an object key holds a NUL or a lone surrogate; `path` says where. */
  | { kind: 'invalid_characters'; path: string }
  /** Arrays and objects nest deeper than allowed; `path` is where the limit was passed. */
  | { kind: 'too_deep'; path: string };

interface Frame {
  value: unknown;
  depth: number;
  parent: Frame | undefined;
  key: string | number | undefined;
}

/**
 * The first problem of a parsed JSON value, or undefined. Checks depth always and text (values and
 * keys) when `checkText` is set. Paths are dotted (`details.items.3.name`), with unstorable
 * characters of keys repaired so the path itself can be stored and shown.
 */
export function findJsonProblem(
  root: unknown,
  options: { maxDepth?: number; checkText?: boolean } = {},
): JsonProblem | undefined {
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const checkText = options.checkText ?? true;
  const stack: Frame[] = [{ value: root, depth: 0, parent: undefined, key: undefined }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    const { value, key } = frame;
    if (checkText && typeof key === 'string' && hasUnstorableText(key)) {
      return { kind: 'invalid_characters', path: pathOf(frame) };
    }
    if (typeof value === 'string') {
      if (checkText && hasUnstorableText(value)) return { kind: 'invalid_characters', path: pathOf(frame) };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    const depth = frame.depth + 1;
    if (depth > maxDepth) return { kind: 'too_deep', path: pathOf(frame) };
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], depth, parent: frame, key: i });
      continue;
    }
    const keys = Object.keys(value);
    for (let i = keys.length - 1; i >= 0; i--) {
      stack.push({ value: (value as Record<string, unknown>)[keys[i]], depth, parent: frame, key: keys[i] });
    }
  }
  return undefined;
}

function pathOf(frame: Frame): string {
  const keys: string[] = [];
  for (let f: Frame | undefined = frame; f?.key !== undefined; f = f.parent) keys.push(repairText(String(f.key)));
  return keys.reverse().join('.');
}

/**
 * Cuts text to at most `maxBytes` bytes of UTF-8 without splitting a character (a surrogate pair
 * stays whole). Shorter text is returned as it is.
 */
export function truncateUtf8(value: string, maxBytes: number): string {
  // Each UTF-16 unit is at most 3 bytes of UTF-8, so short strings need no counting.
  if (value.length * 3 <= maxBytes || Buffer.byteLength(value, 'utf8') <= maxBytes) return value;
  let bytes = 0;
  let end = 0;
  while (end < value.length) {
    const code = value.codePointAt(end)!;
    const units = code > 0xffff ? 2 : 1;
    const size = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += units;
  }
  return value.slice(0, end);
}

/**
 * Refuses JSON input (MCP tool arguments, a REST body) that nests too deep or holds text that
 * cannot be stored: `invalid_request` with reason `too_deeply_nested` or `invalid_characters`.
 */
export function assertStorableJson(value: unknown, place: 'field' | 'argument'): void {
  const problem = findJsonProblem(value);
  if (problem?.kind === 'invalid_characters') throw invalidCharacters(problem.path, place);
  if (problem?.kind === 'too_deep') {
    throw invalidRequest(
      'too_deeply_nested',
      `Arrays and objects nest deeper than ${MAX_JSON_DEPTH} levels.`,
      problem.path === '' ? {} : { [place]: problem.path },
    );
  }
}

/**
 * The refusal of JSON input holding unstorable text: `invalid_request` / `invalid_characters`,
 * naming where (`field` for REST bodies, `argument` for MCP tool arguments).
 */
export function invalidCharacters(path: string, place: 'field' | 'argument'): AlcartaError {
  const where = path !== '' ? path : place === 'field' ? 'The request body' : 'The arguments';
  return invalidRequest(
    'invalid_characters',
    `${where} contains a NUL character or an unpaired UTF-16 surrogate, which cannot be stored.`,
    path === '' ? {} : { [place]: path },
  );
}

/** Cuts text to at most `maxUnits` UTF-16 code units without splitting a surrogate pair. */
export function truncateChars(value: string, maxUnits: number): string {
  if (value.length <= maxUnits) return value;
  const high = value.charCodeAt(maxUnits - 1);
  return value.slice(0, high >= 0xd800 && high <= 0xdbff ? maxUnits - 1 : maxUnits);
}
