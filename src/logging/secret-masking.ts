/**
 * Masking of secrets in text that leaves the process: log lines, request-log paths and error bodies.
 * Product ids (`mbx_`, `msg_`, `chk_`, `tok_`, `wt_`, `task_`, `grt_`, `prn_`… + 22 base62
 * characters) stay readable: they name things, they open nothing, and at 26 or 27 characters they
 * are shorter than any secret Alcarta issues.
 */

/**
 * Bearer secrets and websocket tickets, wherever they appear inside a string: in a path
 * (`/v1/tokens/alc_…`), a query string, an error message, inside another word or percent-encoded.
 */
const SECRET_IN_TEXT = /(alc|wst)(_|%5[Ff])[0-9A-Za-z]{8,}/g;

/**
 * A JWT sent as a bearer token (an OAuth access token, or anything else a client tries): base64url
 * segments joined by dots (also percent-encoded), the first one starting with `eyJ` (`{"`). Three
 * segments for a JWS, five for a JWE; empty ones too (an unsigned token), so that no signed part
 * of a token survives, whatever surrounds it.
 */
const JWT_IN_TEXT = /eyJ[0-9A-Za-z_-]*(?:(?:\.|%2[Ee])[0-9A-Za-z_-]*){2,4}/g;

/**
 * 32 or more characters of base62 or base64url, each possibly percent-encoded: the shape of every
 * secret without a prefix that Alcarta issues or receives (approval-link tokens, console session
 * secrets, CSRF and sign-in form tokens: 43 characters; OpenID Connect `state`, PKCE verifiers and
 * authorization codes of common providers). Cursors (`mc1.…`) are not secrets but can be as long;
 * they never travel in a path, so a path segment of this shape is always treated as a secret.
 */
const SECRET_RUN = '(?:[0-9A-Za-z_-]|%[0-9A-Fa-f]{2}){32,}';
const SECRET_SHAPED = new RegExp(SECRET_RUN);
const SECRET_SHAPED_ALL = new RegExp(SECRET_RUN, 'g');
/** A secret-shaped path segment anywhere in a line (a URL in an error message, Nest's own lines). */
const SECRET_AFTER_SLASH = new RegExp(`/${SECRET_RUN}`, 'g');

/**
 * The password in a URL's user information (`smtp://user:password@relay`). The scheme is bounded: an
 * unbounded one would make a long run of `a.a.a…` (a hostile request path) cost quadratic time.
 */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]{0,31}:\/\/[^\s:@/"'<>]*):[^\s@/"'<>]+@/gi;

/** The console's cookies: the session secret, the sign-in form token, the pending OpenID Connect sign-in. */
const CONSOLE_COOKIE = /\b(alcarta_console(?:_oidc|_sign_in)?=)[0-9A-Za-z_.~%+/=-]+/g;

/**
 * Query and form parameters that carry secrets: OpenID Connect callbacks (`?code=…&state=…`), PKCE,
 * OAuth tokens, CSRF fields, websocket tickets.
 */
const SECRET_PARAMETER =
  /(^|[?&\s"';,])((?:code|state|code_verifier|_csrf|csrf_token|ticket|token|access_token|id_token|refresh_token|client_secret)=)[0-9A-Za-z_.~%+/=-]{8,}/g;

export const REDACTED = '[REDACTED]';

/**
 * The last line of defence, applied to every log line before it is written and to text copied from
 * outside (process output in test failures): masks every secret it can recognise in free text.
 */
export function scrubSecrets(text: string): string {
  return text
    .replace(SECRET_IN_TEXT, '$1_[REDACTED]')
    .replace(JWT_IN_TEXT, 'eyJ[REDACTED]')
    .replace(URL_PASSWORD, '$1:[REDACTED]@')
    .replace(CONSOLE_COOKIE, '$1[REDACTED]')
    .replace(SECRET_PARAMETER, '$1$2[REDACTED]')
    .replace(SECRET_AFTER_SLASH, `/${REDACTED}`);
}

/** Longest request path a log line keeps; longer ones lose their last segments. */
const MAX_LOGGED_PATH = 1024;

/**
 * A request path as the request log keeps it: every segment that holds a secret-shaped run (an
 * approval-link token, a token pasted where an id belongs), percent-encoded or not, is replaced as
 * a whole; an `alc_`/`wst_` secret keeps its prefix, as everywhere in the logs. A path beyond 1 KiB
 * is cut at a segment boundary (no cut secret is left behind), which also bounds the work of the
 * scrubber on hostile paths.
 */
export function maskSecretPath(path: string): string {
  const cut = path.length > MAX_LOGGED_PATH ? `${path.slice(0, path.lastIndexOf('/', MAX_LOGGED_PATH))}/…` : path;
  return cut
    .split('/')
    .map((segment) => (SECRET_SHAPED.test(segment) ? maskedSegment(segment) : segment))
    .join('/');
}

function maskedSegment(segment: string): string {
  const prefix = /^(alc|wst)(?:_|%5[Ff])/.exec(segment);
  return prefix ? `${prefix[1]}_${REDACTED}` : REDACTED;
}

/** Longest echo of the request an error body keeps. */
const MAX_ECHO = 500;

/**
 * Text of an error body that repeats what the client sent (a path, a parameter the router could not
 * decode): every secret-shaped run is masked, wherever it stands, since such text quotes the input
 * in ways no pattern foresees (`Failed to decode param '…'`). Beyond 500 characters it is cut, and
 * the run the cut went through is dropped with it: a cut secret would be too short to recognise.
 */
export function maskSecretsInEcho(text: string): string {
  const cut =
    text.length > MAX_ECHO ? `${text.slice(0, MAX_ECHO).replace(/(?:[0-9A-Za-z_.-]|%[0-9A-Fa-f]{0,2})*$/, '')}…` : text;
  return scrubSecrets(cut).replace(SECRET_SHAPED_ALL, REDACTED);
}
