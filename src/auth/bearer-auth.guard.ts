import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AlcartaError } from '../common/errors';
import { AuthenticatedRequest, PUBLIC_ROUTE, REQUIRED_SCOPES } from './auth.decorators';
import { Scope } from './scopes';
import { TokenService } from './token.service';

/**
 * Every route needs a valid bearer token unless marked @Public(). Unknown, revoked and expired
 * tokens are refused alike (401); a valid token without a required scope gets 403.
 */
@Injectable()
export class BearerAuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly tokens: TokenService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)) return true;

    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!match) {
      throw new AlcartaError('unauthorized', 'missing_token', 'Send the token as "Authorization: Bearer alc_…".');
    }
    const caller = await this.tokens.authenticate(match[1]);
    if (!caller) throw new AlcartaError('unauthorized', 'invalid_token', 'The token is unknown, revoked or expired.');

    const required = this.reflector.getAllAndOverride<Scope[]>(REQUIRED_SCOPES, targets) ?? [];
    if (!caller.hasAnyScope(required)) {
      throw new AlcartaError('forbidden', 'missing_scope', `This needs one of the scopes: ${required.join(', ')}.`, {
        required_scopes: required,
      });
    }
    request.caller = caller;
    return true;
  }
}
