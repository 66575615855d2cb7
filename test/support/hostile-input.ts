/**
 * The hostile inputs of test/e2e/hostile-input.test.ts: values for every JSON field and tool
 * argument, path ids, query values, content types, raw bodies and raw mail, and the internal
 * details that no answer may carry. Random parts come from a seeded PRNG, so a failing run
 * reproduces.
 */
export const SEED = Number(process.env.ALCARTA_HOSTILE_SEED ?? 0x5eed);

/** Internal detail that must never reach a client. */
export const LEAKS: [string, RegExp][] = [
  ['stack trace', /\n\s+at |\s{4}at [\w.<>]+ \(/],
  ['TypeORM error', /QueryFailedError|EntityNotFound|TypeORM/],
  ['PostgreSQL error', /invalid byte sequence|violates|syntax error|relation "|unsupported Unicode escape|SQLSTATE/i],
  ['zod dump', /"code":\s*"invalid_type"|"expected":|ZodError/],
  ['JavaScript error', /TypeError|ReferenceError|RangeError|Maximum call stack/],
  // The servers under test run the build (dist/) or, from source, the TypeScript files of src/.
  ['file path', /node_modules|\/dist\/|\/src\/[\w/.-]+\.ts\b/],
];

/** mulberry32: a small, fast, seedable PRNG (the same sequence for the same seed everywhere). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const nestArray = (depth: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = [v];
  return v;
};
const nestObject = (depth: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = { k: v };
  return v;
};

export interface Hostile {
  label: string;
  value: unknown;
}

/** Hostile JSON values, the same list for every field and argument. */
export function hostileValues(random: () => number): Hostile[] {
  const randomText = (length: number) => {
    // Any UTF-16 unit, NUL, controls and unpaired surrogates included.
    let s = '';
    for (let i = 0; i < length; i++) s += String.fromCharCode(Math.floor(random() * 0x10000));
    return s;
  };
  const values: [string, unknown][] = [
    ['null', null],
    ['true', true],
    ['0', 0],
    ['-1', -1],
    ['1.5', 1.5],
    ['1e-7', 1e-7],
    ['1e308', 1e308],
    ['-1e308', -1e308],
    ['2^53+1', 2 ** 53 + 1],
    ['empty string', ''],
    ['spaces', '   '],
    ['NUL', '\u0000'],
    ['NUL inside', 'a\u0000b'],
    ['lone high surrogate', '\ud800'],
    ['lone low surrogate', 'x\udc00y'],
    ['reversed pair', '\ude00\ud83d'],
    ['percent NUL', '%00'],
    ['dot dot', '../../etc/passwd'],
    ['RTL override', '\u202eevil'],
    ['emoji 1000', '😀'.repeat(1000)],
    ['CRLF header injection', 'x\r\nX-Injected: 1'],
    ['quote injection', "' OR '1'='1"],
    ['LIKE metacharacters', '%_\\'],
    ['date before PostgreSQL', '-271821-04-20T00:00:00Z'],
    ['date far ahead', '+275760-09-13T00:00:00Z'],
    ['year 0', '0000-01-01T00:00:00Z'],
    ['markup', '<script>alert(1)</script>'],
    ['mailbox-shaped id', 'mbx_AAAAAAAAAAAAAAAAAAAAAA'],
    ['request-shaped id', 'chk_AAAAAAAAAAAAAAAAAAAAAA'],
    ['100k string', 'x'.repeat(100_000)],
    ['random text', randomText(64)],
    ['random text 2', randomText(512)],
    ['empty array', []],
    ['array of NUL', ['\u0000']],
    ['array of 5000', Array.from({ length: 5000 }, (_, i) => i)],
    ['array 60 deep', nestArray(60)],
    ['array 70 deep', nestArray(70)],
    ['empty object', {}],
    ['object with NUL key', { '\u0000': 1 }],
    ['object with surrogate deep', { a: { b: { c: '\ud800' } } }],
    ['object 60 deep', nestObject(60)],
    ['__proto__ key', JSON.parse('{"__proto__": {"polluted": true}}')],
  ];
  return values.map(([label, value]) => ({ label, value }));
}

/** Ids in a URL path: impossible shapes, encodings, traversal, unicode, over-long. */
export const HOSTILE_PATH_IDS = [
  '%00',
  'x%00',
  '%2500',
  '..',
  '..%2F..',
  '%2e%2e',
  '.',
  '%20',
  '%',
  '%zz',
  '%ED%A0%80',
  '%F0%9F%98%80',
  '%C3%BC',
  '*',
  'null',
  '-1',
  '1e309',
  'a'.repeat(6000),
  'tok_AAAAAAAAAAAAAAAAAAAAAA',
  'mbx_AAAAAAAAAAAAAAAAAAAAAA',
  'chk_AAAAAAAAAAAAAAAAAAAAAA',
  'chk_%00',
  'mbx_%00',
  'tok_%00',
];

/** Query values (already encoded). */
export const HOSTILE_QUERY_VALUES = [
  '',
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%',
  '-1',
  '0',
  '1.5',
  '1e309',
  '99999999999999999999999',
  'NaN',
  'x'.repeat(6000),
  '%F0%9F%98%80',
  'pending&state=approved',
  '[]',
];

export const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-16',
  'application/json; charset=bogus',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'message/rfc822',
  'application/octet-stream',
  'application/merge-patch+json',
];

export function hostileBodies(random: () => number): [string, Buffer][] {
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(random() * 256)));
  return [
    ['empty', Buffer.alloc(0)],
    ['null', Buffer.from('null')],
    ['string', Buffer.from('"text"')],
    ['number', Buffer.from('5')],
    ['array', Buffer.from('[1,2]')],
    ['truncated', Buffer.from('{"a":')],
    ['unterminated string', Buffer.from('{"a":"')],
    ['bad escape', Buffer.from('{"a":"\\x00"}')],
    ['escaped NUL key', Buffer.from('{"\\u0000":"\\ud800"}')],
    ['BOM', Buffer.from('\ufeff{}')],
    ['utf-16', Buffer.from('{"name":"x"}', 'utf16le')],
    ['raw NUL bytes', Buffer.from([0x7b, 0x00, 0x7d])],
    ['random bytes', bytes(300)],
    ['random bytes 2', bytes(4000)],
    ['100,000 deep', Buffer.from('['.repeat(100_000) + ']'.repeat(100_000))],
    ['100,000 deep unclosed', Buffer.from('{"a":'.repeat(100_000))],
    ['duplicate keys', Buffer.from('{"name":"a","name":{"x":1}}')],
  ];
}

/** Raw RFC 5322 messages with hostile MIME and headers. */
export function hostileMessages(random: () => number): [string, Buffer][] {
  const mail = (...lines: string[]) => Buffer.from(lines.join('\r\n') + '\r\n', 'latin1');
  const head = ['From: s@example.org', 'To: agent@example.com'];
  const nestedMultipart = (depth: number) => {
    const lines = [...head, 'Subject: nested'];
    for (let i = 0; i < depth; i++) lines.push(`Content-Type: multipart/mixed; boundary=b${i}`, '', `--b${i}`);
    lines.push('Content-Type: text/plain', '', 'deep');
    for (let i = depth - 1; i >= 0; i--) lines.push(`--b${i}--`);
    return mail(...lines);
  };
  const manyParts = (count: number) => {
    const lines = [...head, 'Content-Type: multipart/mixed; boundary=p', ''];
    for (let i = 0; i < count; i++) lines.push('--p', 'Content-Type: text/plain', '', `part ${i}`);
    lines.push('--p--');
    return mail(...lines);
  };
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(random() * 256)));
  return [
    ['garbage', bytes(2000)],
    ['garbage after headers', Buffer.concat([mail(...head, ''), bytes(3000)])],
    ['only CRLF', Buffer.from('\r\n')],
    ['only headers', mail(...head)],
    ['no From', mail('To: agent@example.com', 'Subject: x', '', 'b')],
    ['empty From', mail('From:', 'To: x@example.com', '', 'b')],
    ['From group', mail('From: team: a@example.org, b@example.org;', '', 'b')],
    ['NUL in headers', mail('From: s\u0000@example.org', 'To: a\u0000@example.com', 'Subject: a\u0000', '', 'b\u0000')],
    ['8-bit headers', mail('From: "Jörg" <j@example.org>', 'Subject: Grüße \u00ff\u00fe', '', 'b')],
    [
      'unknown charset',
      mail(...head, 'Subject: =?x-unknown?B?AAEC?=', 'Content-Type: text/plain; charset=x-bogus', '', 'b'),
    ],
    [
      'utf-16 lone surrogate',
      mail(...head, 'Subject: =?utf-16le?B?ANg=?=', 'Message-ID: <=?utf-16le?B?ANg=?=@x>', '', 'b'),
    ],
    ['utf-7', mail(...head, 'Content-Type: text/plain; charset=utf-7', '', '+2D3cAA-')],
    ['broken base64', mail(...head, 'Content-Transfer-Encoding: base64', '', '!!!!====****')],
    ['broken quoted-printable', mail(...head, 'Content-Transfer-Encoding: quoted-printable', '', '=ZZ=0=\u0000')],
    ['multipart without boundary', mail(...head, 'Content-Type: multipart/mixed', '', '--x', '', 'a')],
    ['unclosed multipart', mail(...head, 'Content-Type: multipart/mixed; boundary=q', '', '--q', '', 'a')],
    ['nested 200 deep', nestedMultipart(200)],
    ['2000 parts', manyParts(2000)],
    [
      'message/rfc822 inside',
      mail(...head, 'Content-Type: message/rfc822', '', 'From: inner@example.org', '', 'inner'),
    ],
    ['long Message-ID', mail(...head, `Message-ID: <${'m'.repeat(5000)}@x>`, '', 'b')],
    ['long In-Reply-To', mail(...head, `In-Reply-To: <${'i'.repeat(5000)}@x>`, '', 'b')],
    [
      '70,000 References',
      mail(...head, `References: ${Array.from({ length: 70_000 }, (_, i) => `<r${i}@x>`).join(' ')}`, '', 'b'),
    ],
    ['30,000 header lines', mail(...head, ...Array.from({ length: 30_000 }, (_, i) => `X-H${i}: v`), '', 'b')],
    ['1 MB subject', mail(...head, `Subject: ${'s'.repeat(1_000_000)}`, '', 'b')],
    [
      '10,000 recipients',
      mail(
        'From: s@example.org',
        `To: ${Array.from({ length: 10_000 }, (_, i) => `r${i}@example.com`).join(', ')}`,
        '',
        'b',
      ),
    ],
    ['long address', mail(`From: ${'a'.repeat(5000)}@example.org`, 'To: x@example.com', '', 'b')],
    ['bad date', mail(...head, 'Date: yesterday at noon, -99999', '', 'b')],
  ];
}

/** Dotted paths of every argument of a tool's inputSchema, nested object properties included. */
export function argumentPaths(schema: any): string[] {
  const paths: string[] = [];
  const visit = (node: any, prefix: string) => {
    const variants = [node, ...(node?.oneOf ?? []), ...(node?.anyOf ?? [])];
    for (const variant of variants) {
      for (const [key, child] of Object.entries<any>(variant?.properties ?? {})) {
        const path = prefix ? `${prefix}.${key}` : key;
        if (!paths.includes(path)) paths.push(path);
        if (child?.properties || child?.oneOf || child?.anyOf) visit(child, path);
      }
    }
  };
  visit(schema, '');
  return paths;
}

/** The base object with `path` (dotted) set to `value`, or removed when `value` is undefined. */
export function mutate(base: Record<string, unknown>, path: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(base);
  const keys = path.split('.');
  let target: Record<string, unknown> = copy;
  for (const key of keys.slice(0, -1)) {
    if (typeof target[key] !== 'object' || target[key] === null) target[key] = {};
    target = target[key] as Record<string, unknown>;
  }
  const last = keys[keys.length - 1];
  if (value === undefined) delete target[last];
  else target[last] = value;
  return copy;
}
