import { Request, Response } from 'express';

/** The cookie that carries a console session's secret. */
export const SESSION_COOKIE = 'alcarta_console';

/** The value of the cookie `name` the browser sent, if any (the console reads few cookies: no cookie library). */
export function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim() || undefined;
  }
  return undefined;
}

/** The session secret the browser sent, if any. */
export function sessionSecretOf(req: Request): string | undefined {
  return cookieOf(req, SESSION_COOKIE);
}

/**
 * HttpOnly (no script reads it), SameSite=Lax (other sites' forms do not send it), Secure when the
 * installation is served over HTTPS, scoped to /console.
 */
export function setSessionCookie(res: Response, secret: string, expiresAt: Date, secure: boolean): void {
  res.cookie(SESSION_COOKIE, secret, { httpOnly: true, sameSite: 'lax', secure, path: '/console', expires: expiresAt });
}

export function clearSessionCookie(res: Response, secure: boolean): void {
  res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'lax', secure, path: '/console' });
}
