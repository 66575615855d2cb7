import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import { Response } from 'express';
import { AlcartaError } from '../kernel/errors';
import { AppConfig } from '../config/app-config';
import { clientFacingError } from '../database/database-errors';
import { RETRY_AFTER_SECONDS } from '../http/rest-exception.filter';
import { clearSessionCookie } from './console-cookie';
import {
  ConsoleCsrfRefused,
  ConsoleSessionEnded,
  ConsoleSignInFormRefused,
  ConsoleSignInRequired,
} from './console-errors';
import { ConsoleViews } from './console-views';

const ENDED_TEXT = {
  expired: { title: 'Your session expired', text: 'Console sessions last at most 12 hours. Sign in again to go on.' },
  access_ended: {
    title: 'Your session ended',
    text: 'The token you signed in with was revoked, expired or lost the approvals:decide scope. Sign in again with a valid token.',
  },
};

/** Console routes answer people, not API clients: every failure is an HTML page (or a redirect to sign-in). */
@Catch()
export class ConsoleExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('Console');

  constructor(
    private readonly views: ConsoleViews,
    private readonly config: AppConfig,
  ) {}

  catch(error: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const secure = this.config.publicUrl.startsWith('https:');
    if (error instanceof ConsoleSignInRequired) {
      clearSessionCookie(res, secure);
      res.redirect(303, '/console/sign-in');
      return;
    }
    if (error instanceof ConsoleSessionEnded) {
      clearSessionCookie(res, secure);
      this.page(res, 401, { ...ENDED_TEXT[error.why], signIn: true });
      return;
    }
    if (error instanceof ConsoleCsrfRefused) {
      this.page(res, 403, {
        title: 'This form was refused',
        text: 'The form did not carry this session’s security token. Go back, reload the page and try again.',
      });
      return;
    }
    if (error instanceof ConsoleSignInFormRefused) {
      this.page(res, 403, {
        title: 'Sign-in refused',
        text: 'This sign-in did not come from Alcarta’s own sign-in page, or that page was open for more than 30 minutes. Nobody was signed in. Start again from the sign-in page.',
        signIn: true,
      });
      return;
    }
    if (error instanceof AlcartaError && error.code === 'not_found') {
      this.page(res, 404, { title: 'Not found', text: 'There is nothing here that you can see.' });
      return;
    }
    if (error instanceof AlcartaError && error.reason === 'content_changed') {
      this.page(res, 409, {
        title: 'The request is not what you saw',
        text: `${error.message} Nothing was decided.`,
      });
      return;
    }
    if (error instanceof AlcartaError && error.code === 'forbidden') {
      this.page(res, 403, { title: 'Not allowed', text: error.message });
      return;
    }
    if (error instanceof AlcartaError && error.code === 'invalid_request') {
      this.page(res, 400, { title: 'That did not work', text: error.message });
      return;
    }
    if (error instanceof HttpException && error.getStatus() === 404) {
      this.page(res, 404, { title: 'Not found', text: 'There is nothing here that you can see.' });
      return;
    }
    if (clientFacingError(error)?.code === 'unavailable') {
      res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
      this.page(res, 503, {
        title: 'Try again in a moment',
        text: 'The console cannot reach its database right now. Reload the page in a few seconds.',
      });
      return;
    }
    this.logger.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
    this.page(res, 500, { title: 'Something went wrong', text: 'The server could not show this page. Try again.' });
  }

  private page(res: Response, status: number, data: { title: string; text: string; signIn?: boolean }): void {
    res
      .status(status)
      .type('html')
      .send(this.views.render('message', { ...data, signIn: data.signIn ?? false }));
  }
}
