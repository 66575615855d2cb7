import { Request, Response } from 'express';
import { cookieOf } from './console-cookie';
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
 *
 * Deliberately not signed. A signature would only prove that Alcarta wrote the value, and anyone
 * gets a validly signed one by starting a sign-in of their own, so it would stop nothing. What binds
 * the provider's answer to this browser is the callback's `state`, which must equal the one in this
 * browser's cookie; the code is redeemed only with this cookie's PKCE verifier. A forged value only
 * changes the sign-in of the browser that holds it (its two strings go to the provider's token
 * endpoint as form parameters, nothing else reads them). Neither a signature nor `state` stops
 * someone who can write cookies for Alcarta's host (a sibling subdomain, another port of the same
 * host): they could plant a pending sign-in of their own; only the host's isolation prevents that.
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
  const value = cookieOf(req, PENDING_COOKIE);
  if (!value) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(value, 'base64url').toString()) as Record<string, unknown>;
    if (typeof parsed.state === 'string' && typeof parsed.codeVerifier === 'string') {
      return { state: parsed.state, codeVerifier: parsed.codeVerifier };
    }
  } catch {
    // A cookie that is not ours: as if there were none.
  }
  return undefined;
}

/** Single use: cleared when the callback arrives, whatever it brings. */
export function clearPendingSignIn(res: Response, secure: boolean): void {
  res.clearCookie(PENDING_COOKIE, { httpOnly: true, sameSite: 'lax', secure, path: PENDING_PATH });
}
