import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Request, Response } from 'express';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { cookieOf } from './console-cookie';
import { ConsoleSignInFormRefused } from './console-errors';

/** The pre-session cookie of the token sign-in form. */
const FORM_COOKIE = 'alcarta_console_sign_in';
/** The form field that repeats the cookie's value. */
const FORM_FIELD = '_csrf';
/** Long enough to find and paste a token; a form left open longer is refused with a way back. */
const FORM_LIFETIME_MS = 30 * 60 * 1000;
/** Only the sign-in form's POST reads it. */
const FORM_PATH = '/console/sign-in';
/** 32 random bytes, base64url. */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/**
 * Login CSRF protection of the token sign-in form. Without it a hostile site could auto-submit a
 * form with the attacker's own token to POST /console/sign-in: the victim's browser would then be
 * signed in as the attacker, and whatever the victim does in the console (decisions, what they
 * read and trust) happens in the attacker's session. There is no session yet to bind a CSRF token
 * to, so the form carries a pre-session double-submit token: GET /console/sign-in sets a random
 * value in a short-lived cookie (HttpOnly, SameSite=Lax, Secure behind HTTPS, path
 * /console/sign-in) and puts the same value in a hidden field; the POST must bring both, equal
 * (compared in constant time). Another site can make the browser send the cookie but cannot read
 * the page to learn the value. The value proves only where the form came from, so it is not
 * single use: a second sign-in tab keeps working.
 *
 * A double-submit token alone does not stop a site that can write cookies for Alcarta's host (a
 * sibling subdomain, another port of the same host: same site, so SameSite does not help): it
 * fetches a pair itself and plants the cookie. So a browser's own word on where the POST came
 * from, `Sec-Fetch-Site`, must also be `same-origin` when it is sent (browsers since 2023 do);
 * a client that sends none (curl, an old browser) is judged by the token alone.
 */
@Injectable()
export class ConsoleSignInFormGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Request>();
    const site = req.header('sec-fetch-site');
    const body = req.body as Record<string, unknown> | undefined;
    if ((site !== undefined && site !== 'same-origin') || !sameToken(cookieOf(req, FORM_COOKIE), body?.[FORM_FIELD])) {
      throw new ConsoleSignInFormRefused();
    }
    return true;
  }
}

/**
 * The token for the sign-in form this response renders: the browser's current one if it has one
 * (so that several sign-in tabs agree), else a new one; the cookie is (re)set for a full lifetime.
 */
export function issueSignInFormToken(req: Request, res: Response, secure: boolean): string {
  const current = cookieOf(req, FORM_COOKIE);
  const token = current && TOKEN_SHAPE.test(current) ? current : randomBytes(32).toString('base64url');
  res.cookie(FORM_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure,
    path: FORM_PATH,
    maxAge: FORM_LIFETIME_MS,
  });
  return token;
}

function sameToken(cookie: string | undefined, field: unknown): boolean {
  if (!cookie || !TOKEN_SHAPE.test(cookie) || typeof field !== 'string') return false;
  const [expected, given] = [Buffer.from(cookie), Buffer.from(field)];
  return given.length === expected.length && timingSafeEqual(given, expected);
}
