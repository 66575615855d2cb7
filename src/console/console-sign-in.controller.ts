import { Body, Controller, Get, Post, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { Request, Response } from 'express';
import { Public } from '../kernel/route-decorators';
import { AppConfig } from '../config/app-config';
import { clearSessionCookie, setSessionCookie } from './console-cookie';
import { ConsoleExceptionFilter } from './console-exception.filter';
import { clearPendingSignIn, pendingSignInOf, setPendingSignIn } from './console-oidc-cookie';
import { ConsoleOidcService, OidcProblem } from './console-oidc.service';
import { ConsoleSessionGuard, CurrentSession } from './console-session.guard';
import { ConsoleSignInFormGuard, issueSignInFormToken } from './console-sign-in-form.guard';
import { ActiveSession, ConsoleSessionService } from './console-session.service';
import { ConsoleViews } from './console-views';

const SIGN_IN_PROBLEMS = {
  unknown_token: 'This token is unknown, revoked or expired. Check that you pasted all of it.',
  missing_scope: 'This token may not decide approvals: it needs the approvals:decide scope.',
};

/**
 * What the sign-in page says when a page sent the person there: signed out (perhaps in another
 * tab), or the session ran out while a live list was open (the cookie is gone by then, so the
 * console's "session expired" page could not say it).
 */
const SIGN_IN_NOTICES = {
  signed_out: 'You are signed out.',
  expired: 'Your session expired: console sessions last at most 12 hours. Sign in again to go on.',
  none: undefined,
};

function noticeOf(query: Record<string, unknown>): keyof typeof SIGN_IN_NOTICES {
  if (query.signed_out === '1') return 'signed_out';
  if (query.expired === '1') return 'expired';
  return 'none';
}

/** What the callback page says when an OpenID Connect sign-in does not end in a session. */
const OIDC_PROBLEMS: Record<OidcProblem, { title: string; text: string }> = {
  not_started: {
    title: 'Sign-in not recognised',
    text: 'This browser has no sign-in in progress (it took longer than 10 minutes, or began in another browser). Start again.',
  },
  wrong_state: {
    title: 'Sign-in refused',
    text: 'The answer from the identity provider does not belong to the sign-in this browser started. Start again from the sign-in page.',
  },
  refused_at_provider: {
    title: 'The identity provider did not sign you in',
    text: 'The identity provider refused the sign-in',
  },
  exchange_failed: {
    title: 'Sign-in failed',
    text: 'The identity provider’s answer could not be turned into a session for Alcarta. Try again; if it keeps failing, tell the administrator (the server log says why).',
  },
  provider_unavailable: {
    title: 'The identity provider is unavailable',
    text: 'You signed in at the identity provider, but Alcarta cannot reach it right now to check the sign-in. Try again in a minute; if it keeps failing, tell the administrator.',
  },
  missing_scope: {
    title: 'You may not decide approvals',
    text: 'You signed in, but your account does not have the approvals:decide scope for Alcarta. Ask the administrator of the identity provider to give it to you.',
  },
};

/** The status of a callback page that ends without a session; any other problem is a 400. */
const OIDC_PROBLEM_STATUS: Partial<Record<OidcProblem, number>> = { missing_scope: 403, provider_unavailable: 503 };

/**
 * Sign-in by OpenID Connect (when configured) or by pasting a token, and sign-out. With OpenID
 * Connect the token form stays as the second option: static tokens remain valid credentials.
 */
@Controller('console')
@Public()
@UseFilters(ConsoleExceptionFilter)
export class ConsoleSignInController {
  constructor(
    private readonly sessions: ConsoleSessionService,
    private readonly views: ConsoleViews,
    private readonly config: AppConfig,
    private readonly oidc: ConsoleOidcService,
  ) {}

  @Get('sign-in')
  form(@Query() query: Record<string, unknown>, @Req() req: Request, @Res() res: Response): void {
    res.type('html').send(this.signInPage(req, res, { notice: SIGN_IN_NOTICES[noticeOf(query)] }));
  }

  /** Only the form of the sign-in page above is accepted (see ConsoleSignInFormGuard: login CSRF). */
  @Post('sign-in')
  @UseGuards(ConsoleSignInFormGuard)
  async signIn(@Body() body: Record<string, unknown>, @Req() req: Request, @Res() res: Response): Promise<void> {
    const token = typeof body.token === 'string' ? body.token : '';
    const result = await this.sessions.signInWithToken(token);
    if (!result.ok) {
      res
        .status(400)
        .type('html')
        .send(this.signInPage(req, res, { error: SIGN_IN_PROBLEMS[result.problem] }));
      return;
    }
    setSessionCookie(res, result.secret, result.expiresAt, this.secure);
    res.redirect(303, '/console');
  }

  /** Leaves for the identity provider; `state` and the PKCE verifier stay behind in a cookie. */
  @Get('sign-in/oidc')
  async startOidc(@Res() res: Response): Promise<void> {
    if (!this.oidc.enabled) {
      res.redirect(303, '/console/sign-in');
      return;
    }
    const started = await this.oidc.start();
    if (!started) {
      res
        .status(502)
        .type('html')
        .send(
          this.views.render('message', {
            title: 'The identity provider could not be reached',
            text: 'Alcarta could not reach the identity provider to sign you in. Try again in a moment; if it keeps failing, tell the administrator.',
            signIn: true,
          }),
        );
      return;
    }
    setPendingSignIn(res, started.pending, this.secure);
    res.redirect(303, started.authorizationUrl.href);
  }

  @Get('sign-in/callback')
  async oidcCallback(@Req() req: Request, @Res() res: Response): Promise<void> {
    const pending = pendingSignInOf(req);
    clearPendingSignIn(res, this.secure);
    const query = req.originalUrl.indexOf('?');
    const result = await this.oidc.finish(query >= 0 ? req.originalUrl.slice(query) : '', pending);
    if (!result.ok) {
      const problem = OIDC_PROBLEMS[result.problem];
      const text = result.providerError ? `${problem.text} (${result.providerError}).` : problem.text;
      res
        .status(OIDC_PROBLEM_STATUS[result.problem] ?? 400)
        .type('html')
        .send(this.views.render('message', { title: problem.title, text, signIn: true }));
      return;
    }
    setSessionCookie(res, result.secret, result.expiresAt, this.secure);
    res.redirect(303, '/console');
  }

  @Post('sign-out')
  @UseGuards(ConsoleSessionGuard)
  async signOut(@CurrentSession() session: ActiveSession, @Res() res: Response): Promise<void> {
    await this.sessions.signOut(session);
    clearSessionCookie(res, this.secure);
    res.redirect(303, '/console/sign-in?signed_out=1');
  }

  private get secure(): boolean {
    return this.config.publicUrl.startsWith('https:');
  }

  private signInPage(req: Request, res: Response, data: { error?: string; notice?: string }): string {
    return this.views.render('sign-in', {
      title: 'Sign in',
      error: data.error,
      notice: data.notice,
      formToken: issueSignInFormToken(req, res, this.secure),
      provider: this.oidc.enabled ? this.oidc.providerName : undefined,
    });
  }
}
