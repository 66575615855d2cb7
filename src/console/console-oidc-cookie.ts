import { Request, Response } from 'express';
import { PendingSignIn } from './console-oidc.service';

/** The cookie that carries an OpenID Connect sign-in between leaving for the provider and coming back. */
const PENDING_COOKIE = 'alcarta_console_oidc';
/** Time enough to sign in at the provider; an abandoned sign-in leaves nothing behind after it. */
const PENDING_LIFETIME_MS = 10 * 60 * 1000;
/** Only the callback reads it. */
const PENDING_PATH = '/console/sign-in';

/**
 * `state` and the PKCE code_verifier stay in this browser, never in a URL: HttpOnly, SameSite=Lax
 * (the provider's redirect back is a top-level GET, which Lax lets through), Secure over HTTPS.
 */
export function setPendingSignIn(res: Response, pending: PendingSignIn, secure: boolean): void {
  const value = Buffer.from(JSON.stringify(pending)).toString('base64url');
  res.cookie(PENDING_COOKIE, value, {
    httpOnly: true,
    sameSite: 'lax',
    secure,
    path: PENDING_PATH,
    maxAge: PENDING_LIFETIME_MS,
  });
}

export function pendingSignInOf(req: Request): PendingSignIn | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0 || part.slice(0, eq).trim() !== PENDING_COOKIE) continue;
    try {
      const parsed = JSON.parse(Buffer.from(part.slice(eq + 1).trim(), 'base64url').toString()) as Record<
        string,
        unknown
      >;
      if (typeof parsed.state === 'string' && typeof parsed.codeVerifier === 'string') {
        return { state: parsed.state, codeVerifier: parsed.codeVerifier };
      }
    } catch {
      // A cookie that is not ours: as if there were none.
    }
    return undefined;
  }
  return undefined;
}

/** Single use: cleared when the callback arrives, whatever it brings. */
export function clearPendingSignIn(res: Response, secure: boolean): void {
  res.clearCookie(PENDING_COOKIE, { httpOnly: true, sameSite: 'lax', secure, path: PENDING_PATH });
}
