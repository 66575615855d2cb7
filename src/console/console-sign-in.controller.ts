import { Body, Controller, Get, Post, Query, Res, UseFilters, UseGuards } from '@nestjs/common';
import { Response } from 'express';
import { Public } from '../auth/auth.decorators';
import { AppConfig } from '../config/app-config';
import { clearSessionCookie, setSessionCookie } from './console-cookie';
import { ConsoleExceptionFilter } from './console-exception.filter';
import { ConsoleSessionGuard, CurrentSession } from './console-session.guard';
import { ActiveSession, ConsoleSessionService } from './console-session.service';
import { ConsoleViews } from './console-views';

const SIGN_IN_PROBLEMS = {
  unknown_token: 'This token is unknown, revoked or expired. Check that you pasted all of it.',
  missing_scope: 'This token may not decide approvals: it needs the approvals:decide scope.',
};

/** Sign-in by pasting a token (without OpenID Connect), and sign-out. */
@Controller('console')
@Public()
@UseFilters(ConsoleExceptionFilter)
export class ConsoleSignInController {
  constructor(
    private readonly sessions: ConsoleSessionService,
    private readonly views: ConsoleViews,
    private readonly config: AppConfig,
  ) {}

  @Get('sign-in')
  form(@Query('signed_out') signedOut: unknown, @Res() res: Response): void {
    res.type('html').send(this.signInPage({ notice: signedOut === '1' ? 'You are signed out.' : undefined }));
  }

  @Post('sign-in')
  async signIn(@Body() body: Record<string, unknown>, @Res() res: Response): Promise<void> {
    const token = typeof body.token === 'string' ? body.token : '';
    const result = await this.sessions.signInWithToken(token);
    if (!result.ok) {
      res
        .status(400)
        .type('html')
        .send(this.signInPage({ error: SIGN_IN_PROBLEMS[result.problem] }));
      return;
    }
    setSessionCookie(res, result.secret, result.expiresAt, this.secure);
    res.redirect(303, '/console');
  }

  @Post('sign-out')
  @UseGuards(ConsoleSessionGuard)
  async signOut(@CurrentSession() session: ActiveSession, @Res() res: Response): Promise<void> {
    await this.sessions.signOut(session.secret);
    clearSessionCookie(res, this.secure);
    res.redirect(303, '/console/sign-in?signed_out=1');
  }

  private get secure(): boolean {
    return this.config.publicUrl.startsWith('https:');
  }

  private signInPage(data: { error?: string; notice?: string }): string {
    return this.views.render('sign-in', { title: 'Sign in', error: data.error, notice: data.notice });
  }
}
