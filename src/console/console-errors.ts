/** No session cookie, or one naming no session: the page sends the browser to sign-in. */
export class ConsoleSignInRequired extends Error {}

/** The cookie names a session that ended by itself: the person is told why, not just redirected. */
export class ConsoleSessionEnded extends Error {
  constructor(readonly why: 'expired' | 'access_ended') {
    super(`console session ${why}`);
  }
}

/** A state-changing form came without this session's CSRF token. */
export class ConsoleCsrfRefused extends Error {}

/** A token sign-in POST that did not come from the console's own sign-in page (login CSRF). */
export class ConsoleSignInFormRefused extends Error {}
