import { CheckOutcomes } from './authentication-results';
import { headerFieldValues } from './rfc822-header-block';

/** One method's result in an Authentication-Results field, e.g. `dkim=pass header.d=example.com`. */
export interface MethodResult {
  /** Lower-case, e.g. `spf`, `dkim`, `dmarc`, `arc`. */
  method: string;
  version?: string;
  /** Lower-case, e.g. `pass`, `fail`, `none`. */
  result: string;
  reason?: string;
  /** `ptype.property` (lower-case) → value, e.g. `header.d` → `example.com`. */
  properties: Record<string, string>;
}

/** An Authentication-Results field value (RFC 8601), as far as it could be read. */
export interface AuthenticationResultsField {
  /**
   * Who checked, e.g. `mx.google.com`. Undefined when the field starts with a result instead:
   * Microsoft 365 writes its fields that way.
   */
  authservId?: string;
  version?: string;
  /** Empty for `none` (nothing was checked) and for a field none of whose results could be read. */
  results: MethodResult[];
}

/** The Authentication-Results field values of a message's header block, top to bottom. */
export function authenticationResultsHeaders(rawHeaderBlock: Buffer | string): string[] {
  return headerFieldValues(rawHeaderBlock, 'authentication-results');
}

/**
 * What the mailbox provider found when it received the message, as the outcomes senderVerdict()
 * turns into the stored verdict: from the topmost Authentication-Results field whose authserv-id is
 * one of `trustedIds` (case-insensitive), or undefined when no field is. Only the topmost counts:
 * the provider adds its field above those the message arrived with, and anyone can write a field
 * naming the provider lower down (RFC 8601, section 5). A field without an authserv-id matches no
 * id. Never throws: an unreadable field matches nothing, an unreadable result is left out.
 */
export function trustedProviderOutcomes(headerValues: string[], trustedIds: string[]): CheckOutcomes | undefined {
  const trusted = new Set(trustedIds.map((id) => id.trim().toLowerCase()));
  if (trusted.size === 0) return undefined;
  for (const value of headerValues) {
    const field = parseAuthenticationResults(value);
    if (field.authservId !== undefined && trusted.has(field.authservId.toLowerCase())) {
      return outcomesOf(field.results);
    }
  }
  return undefined;
}

/**
 * The checks' result words as the SMTP listener's own checks report them; a method the provider did
 * not report is `none`. `hardfail` is the older spelling of SPF's `fail` (RFC 8601, 2.7.2).
 */
function outcomesOf(results: MethodResult[]): CheckOutcomes {
  const first = (method: string) => results.find((r) => r.method === method)?.result;
  const spf = first('spf');
  return {
    spf: spf === 'hardfail' ? 'fail' : spf,
    dkim: results.filter((r) => r.method === 'dkim').map((r) => r.result),
    arc: first('arc') ?? 'none',
    dmarc: first('dmarc') ?? 'none',
  };
}

type Token = { kind: 'word'; text: string } | { kind: 'quoted'; text: string } | { kind: ';' | '=' };

/**
 * RFC 8601's `authres-payload`: `authserv-id [version] ( "; none" / 1*( "; " method[/version]=result
 * [reason=value] *ptype.property=value ) )`, with comments and white space (CFWS) anywhere between.
 */
export function parseAuthenticationResults(value: string): AuthenticationResultsField {
  const segments: Token[][] = [[]];
  for (const token of tokenize(value)) {
    if (token.kind === ';') segments.push([]);
    else segments[segments.length - 1].push(token);
  }
  const [head, ...rest] = segments;
  const field: AuthenticationResultsField = { results: [] };
  if (head.some((token) => token.kind === '=')) {
    rest.unshift(head);
  } else if (head[0]?.kind === 'word' || head[0]?.kind === 'quoted') {
    field.authservId = head[0].text;
    if (head[1]?.kind === 'word' && /^\d+$/.test(head[1].text)) field.version = head[1].text;
  }
  for (const segment of rest) {
    const result = methodResult(segment);
    if (result) field.results.push(result);
  }
  return field;
}

function methodResult(tokens: Token[]): MethodResult | undefined {
  const [method, equals, result] = tokens;
  if (method?.kind !== 'word' || equals?.kind !== '=' || result?.kind !== 'word') return undefined;
  const [name, version] = method.text.split('/');
  if (!/^[a-z0-9_-]+$/i.test(name)) return undefined;
  const parsed: MethodResult = { method: name.toLowerCase(), result: result.text.toLowerCase(), properties: {} };
  if (version) parsed.version = version;
  for (let i = 3; i + 2 < tokens.length; i++) {
    const [key, sign, val] = [tokens[i], tokens[i + 1], tokens[i + 2]];
    if (key.kind !== 'word' || sign.kind !== '=' || (val.kind !== 'word' && val.kind !== 'quoted')) continue;
    const lowerKey = key.text.toLowerCase();
    if (lowerKey === 'reason') parsed.reason = val.text;
    else if (/^[a-z0-9_-]+\.[a-z0-9_.-]+$/.test(lowerKey)) parsed.properties[lowerKey] = val.text;
    i += 2;
  }
  return parsed;
}

/**
 * Words, quoted strings (unescaped), `;` and `=`; comments are dropped, nested ones too. An
 * unterminated comment or quoted string runs to the end of the value.
 */
function tokenize(value: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < value.length) {
    const c = value[i];
    if (c === '(') {
      i = afterComment(value, i);
    } else if (c === '"') {
      let text = '';
      for (i++; i < value.length && value[i] !== '"'; i++) {
        if (value[i] === '\\' && i + 1 < value.length) i++;
        text += value[i];
      }
      tokens.push({ kind: 'quoted', text });
      i++;
    } else if (c === ';' || c === '=') {
      tokens.push({ kind: c });
      i++;
    } else if (/\s/.test(c) || c === ')') {
      // A stray `)` closes no comment: it is dropped like white space.
      i++;
    } else {
      const start = i;
      while (i < value.length && !/[\s()";=]/.test(value[i])) i++;
      tokens.push({ kind: 'word', text: value.slice(start, i) });
    }
  }
  return tokens;
}

/** The index just past the comment opening at `start` (RFC 5322 comments nest and escape with `\`). */
function afterComment(value: string, start: number): number {
  let depth = 0;
  for (let i = start; i < value.length; i++) {
    if (value[i] === '\\') i++;
    else if (value[i] === '(') depth++;
    else if (value[i] === ')' && --depth === 0) return i + 1;
  }
  return value.length;
}
