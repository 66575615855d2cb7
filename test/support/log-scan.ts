/**
 * The scanning half of the whole-run log scan (test-logs.ts collects): every log file the servers
 * of a test run wrote is searched for secrets, by value (each secret the run recorded) and by shape
 * (what a secret Alcarta issues or accepts looks like). A finding names the file, the line, what
 * kind of secret it is and where it stands in the line, with the secret itself masked.
 *
 * Legitimate values must not look like findings, by construction rather than by exemption lists:
 * product ids are 26 or 27 characters (prefix included) and shorter than every shape; hashes at
 * rest are 64 hex characters; cursors (`mc1.…`) and Message-IDs (`<…@host>`) touch a `.` or `@`,
 * which the 43-character shape refuses as a neighbour; a value a test recorded is only matched on
 * 12-character fragments of its random part, which nothing else shares by chance.
 */
import { createReadStream } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { SECRETS_SUBDIR } from './test-logs';

export interface Finding {
  file: string;
  line: number;
  /** What the line holds, e.g. `JWT`, `approval-link token (mail), recorded by approval-mail.test`. */
  kinds: string[];
  /** The line around the secrets, with each masked. */
  excerpt: string;
}

export interface RecordedSecret {
  kind: string;
  value: string;
  /** The test file that recorded it. */
  test?: string;
}

interface Shape {
  kind: string;
  pattern: RegExp;
}

/** Where a secret stands in a line (as decoded), and what kind it is. */
interface Span {
  kind: string;
  start: number;
  end: number;
}

/** What unmasked secrets look like. The server's scrubber turns each of them into a `[REDACTED]` form. */
const SHAPES: Shape[] = [
  { kind: 'static token secret (alc_…)', pattern: /alc_[0-9A-Za-z]{43,}/g },
  { kind: 'websocket ticket (wst_…)', pattern: /wst_[0-9A-Za-z]{20,}/g },
  {
    kind: 'JWT',
    pattern: /eyJ[0-9A-Za-z_-]{4,}(?:\.|%2[Ee])eyJ[0-9A-Za-z_-]{4,}(?:\.|%2[Ee])[0-9A-Za-z_-]*/g,
  },
  { kind: 'approval-link token in a path', pattern: /\/links\/(?:[0-9A-Za-z_-]|%[0-9A-Fa-f]{2}){32,}/g },
  { kind: 'console cookie', pattern: /alcarta_console(?:_oidc|_sign_in)?=(?!\[REDACTED\])[^;\s"',]{16,}/g },
  {
    kind: 'secret query or form parameter',
    pattern:
      /[?&](?:code|state|code_verifier|_csrf|ticket|token|access_token|id_token|refresh_token|client_secret)=(?!\[REDACTED\])[0-9A-Za-z_.~%-]{16,}/g,
  },
  {
    // 32 random bytes in base64url (link, session, CSRF and form tokens, PKCE verifiers, OpenID
    // Connect state): exactly 43 characters, with digits, upper and lower case as random text has
    // (words and kebab-case names do not), not glued to a `.`, `@`, `=`, `+` or `/` (cursors,
    // Message-IDs, standard base64, paths: the path rule below judges those).
    kind: '43-character base64url token',
    pattern:
      /(?<![0-9A-Za-z_.@=+/-])(?=[0-9A-Za-z_-]*\d)(?=[0-9A-Za-z_-]*[A-Z])(?=[0-9A-Za-z_-]*[a-z])[0-9A-Za-z_-]{43}(?![0-9A-Za-z_.@=+/-])/g,
  },
];

/** A secret-shaped path segment (32+ base62/base64url characters), which request logs must mask. */
const SECRET_SEGMENT = /^(?:[0-9A-Za-z_-]|%[0-9A-Fa-f]{2}){32,}$/;
const REQUEST_PATH = /"req":\{"method":"[A-Z]+","path":"([^"]*)"/;

/** Length of the fragments recorded values are found by: beyond chance, short enough to survive a cut. */
const FRAGMENT = 12;
const TOKEN_RUN = /[0-9A-Za-z_-]{12,}/g;

/** Percent-encoded characters of secrets, decoded (`alc%5F…`, `%2D`), so that encoding hides nothing. */
function decodeSecretChars(line: string): string {
  return line.replace(/%([0-9A-Fa-f]{2})/g, (escape, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return /[0-9A-Za-z_.-]/.test(char) ? char : escape;
  });
}

/** A line with every span of a secret masked, cut to the stretch around the first one. */
function excerpt(line: string, spans: readonly Span[]): string {
  let masked = line;
  for (const span of [...spans].sort((a, b) => b.start - a.start)) {
    masked = `${masked.slice(0, span.start)}«secret»${masked.slice(span.end)}`;
  }
  const first = Math.min(...spans.map((span) => span.start));
  return masked.slice(Math.max(0, first - 120), first + 160).replace(/\s+/g, ' ');
}

/**
 * Whether a fragment can be told from ordinary text by its value: a value a test made up to be
 * refused (`wst_AAAA…`, `alc_forged`) is no secret, and its fragment would match ids and padding.
 * Twelve random base62 characters have fewer than 6 distinct ones with a chance below one in 10^6.
 */
function looksRandom(fragment: string): boolean {
  return fragment.length === FRAGMENT && new Set(fragment).size >= 6;
}

/**
 * Finds secrets in log lines. Recorded values are indexed by the first and the last 12 characters
 * of their random part (for a JWT, its signature): a line is searched on every 12-character window
 * of its base64url runs, so a secret is found whole, cut, inside a longer word or percent-encoded.
 */
export class SecretScanner {
  private readonly fragments = new Map<string, string>();

  constructor(recorded: Iterable<RecordedSecret>) {
    for (const { kind, value, test } of recorded) {
      const runs = value.match(TOKEN_RUN);
      const core = runs?.at(-1);
      if (!core) continue;
      const label = test ? `${kind}, recorded by ${test}` : kind;
      for (const fragment of [core.slice(0, FRAGMENT), core.slice(-FRAGMENT)]) {
        if (looksRandom(fragment)) this.fragments.set(fragment, label);
      }
    }
  }

  get recordedFragments(): number {
    return this.fragments.size;
  }

  /** The secrets in one line: what kinds, and the line (decoded) with each masked; undefined when clean. */
  scanLine(raw: string): { kinds: string[]; excerpt: string } | undefined {
    const line = decodeSecretChars(raw);
    const spans: Span[] = [];
    for (const { kind, pattern } of SHAPES) {
      for (const match of line.matchAll(pattern))
        spans.push({ kind, start: match.index, end: match.index + match[0].length });
    }
    const path = REQUEST_PATH.exec(line);
    if (path && path[1].split('/').some((segment) => SECRET_SEGMENT.test(segment))) {
      const start = path.index + path[0].length - path[1].length - 1;
      spans.push({ kind: 'secret-shaped path segment in a request log', start, end: start + path[1].length });
    }
    if (this.fragments.size > 0) {
      for (const run of line.matchAll(TOKEN_RUN)) {
        for (let i = 0; i + FRAGMENT <= run[0].length; i++) {
          const kind = this.fragments.get(run[0].slice(i, i + FRAGMENT));
          if (kind) {
            spans.push({ kind, start: run.index, end: run.index + run[0].length });
            break;
          }
        }
      }
    }
    if (spans.length === 0) return undefined;
    return { kinds: [...new Set(spans.map((span) => span.kind))], excerpt: excerpt(line, spans) };
  }
}

/**
 * The bootstrap banner is the one place a secret is printed on purpose: a server that generated its
 * admin token shows it once on standard error, between two rules. Only a stderr file can hold it.
 */
const BANNER_START = 'Alcarta admin token (shown once';
const BANNER_END = /^=+$/;

/** Scans one log file line by line (files can be large: they are streamed). */
export async function scanFile(path: string, name: string, scanner: SecretScanner): Promise<Finding[]> {
  const findings: Finding[] = [];
  const stderr = name.endsWith('.stderr.log');
  let inBanner = false;
  let number = 0;
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity });
  for await (const line of lines) {
    number++;
    if (stderr && line.includes(BANNER_START)) inBanner = true;
    else if (inBanner && BANNER_END.test(line.trim())) inBanner = false;
    if (inBanner) continue;
    const hit = scanner.scanLine(line);
    if (hit) findings.push({ file: name, line: number, kinds: hit.kinds, excerpt: hit.excerpt });
  }
  return findings;
}

/** Every secret the run's support code recorded (secrets/*.jsonl in the log directory). */
export async function recordedSecrets(dir: string): Promise<RecordedSecret[]> {
  const secretsDir = join(dir, SECRETS_SUBDIR);
  const names = await readdir(secretsDir).catch(() => [] as string[]);
  const secrets: RecordedSecret[] = [];
  for (const name of names.filter((n) => n.endsWith('.jsonl'))) {
    for (const line of (await readFile(join(secretsDir, name), 'utf8')).split('\n')) {
      if (line.trim() !== '') secrets.push(JSON.parse(line) as RecordedSecret);
    }
  }
  return secrets;
}

export interface ScanReport {
  files: number;
  bytes: number;
  recorded: number;
  findings: Finding[];
}

/** Scans every log file of a run's log directory for secrets. */
export async function scanLogDir(dir: string): Promise<ScanReport> {
  const recorded = await recordedSecrets(dir);
  const scanner = new SecretScanner(recorded);
  const entries = await readdir(dir, { withFileTypes: true });
  const files = entries.filter((e) => e.isFile() && e.name.endsWith('.log')).map((e) => e.name);
  const report: ScanReport = { files: files.length, bytes: 0, recorded: recorded.length, findings: [] };
  for (const name of files.sort()) {
    const path = join(dir, name);
    report.bytes += (await stat(path)).size;
    report.findings.push(...(await scanFile(path, name, scanner)));
  }
  return report;
}
