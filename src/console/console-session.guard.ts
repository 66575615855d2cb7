import { CanActivate, createParamDecorator, ExecutionContext, Injectable } from '@nestjs/common';
import { Request } from 'express';
import { sessionSecretOf } from './console-cookie';
import { ConsoleCsrfRefused, ConsoleSessionEnded, ConsoleSignInRequired } from './console-errors';
import { ActiveSession, ConsoleSessionService, isCsrfTokenOf } from './console-session.service';

interface ConsoleRequest extends Request {
  consoleSession?: ActiveSession;
}

/**
 * The console's own authentication (its routes are @Public() to the bearer guard): a live session
 * cookie, and on every POST the session's CSRF token in the form field `_csrf`.
 */
@Injectable()
export class ConsoleSessionGuard implements CanActivate {
  constructor(private readonly sessions: ConsoleSessionService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<ConsoleRequest>();
    const found = await this.sessions.lookup(sessionSecretOf(req));
    if (found.kind === 'none') throw new ConsoleSignInRequired();
    if (found.kind === 'ended') throw new ConsoleSessionEnded(found.why);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const body = req.body as Record<string, unknown> | undefined;
      if (!isCsrfTokenOf(found.session, body?._csrf)) throw new ConsoleCsrfRefused();
    }
    req.consoleSession = found.session;
    return true;
  }
}

/** The session ConsoleSessionGuard found for this request. */
export const CurrentSession = createParamDecorator((_: unknown, ctx: ExecutionContext): ActiveSession => {
  const session = ctx.switchToHttp().getRequest<ConsoleRequest>().consoleSession;
  if (!session) throw new Error('CurrentSession used without ConsoleSessionGuard');
  return session;
});
