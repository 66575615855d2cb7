import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AlcartaError } from '../kernel/errors';
import { AppConfig } from '../config/app-config';
import { RateLimiter } from '../http/rate-limiter';
import { AuthenticatedRequest, PUBLIC_ROUTE, REQUIRED_SCOPES } from '../kernel/route-decorators';
import { Caller } from '../kernel/caller';
import { OAuthAuthenticator } from './oauth/oauth-authenticator.service';
import { Scope } from '../kernel/scopes';
import { hashSecret } from './token-secret';
import { TokenService } from './token.service';

/**
 * Every route needs a valid bearer token unless marked @Public(): a static `alc_` token, or (with
 * ALCARTA_OAUTH_ISSUER set) a JWT access token of that issuer. Unknown, revoked, expired and
 * unverifiable tokens are refused alike (401); a valid token without a required scope gets 403.
 *
 * Each credential may make ALCARTA_RATE_LIMIT_PER_SECOND requests per second on this replica
 * (429 above it). The bucket is keyed by the hash of the secret, before the token is looked up:
 * one secret is one token, and a credential over its limit is refused without a database query,
 * so a runaway client cannot load PostgreSQL for everyone else.
 */
@Injectable()
export class BearerAuthGuard implements CanActivate {
  private readonly limiter: RateLimiter;

  constructor(
    private readonly reflector: Reflector,
    private readonly tokens: TokenService,
    private readonly oauth: OAuthAuthenticator,
    config: AppConfig,
  ) {
    this.limiter = new RateLimiter(config.rateLimitPerSecond);
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_ROUTE, targets)) return true;

    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!match) {
      throw new AlcartaError('unauthorized', 'missing_token', 'Send the token as "Authorization: Bearer alc_…".');
    }
    const retryAfter = this.limiter.take(hashSecret(match[1]));
    if (retryAfter !== undefined) {
      throw new AlcartaError('limit_exceeded', 'rate_limited', 'Too many requests with this token; slow down.', {
        retry_after_seconds: retryAfter,
      });
    }
    const caller = await this.authenticate(match[1]);
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

  /** A static `alc_` secret is looked up; anything else is tried as a JWT when OAuth is configured. */
  private authenticate(secret: string): Promise<Caller | null> {
    if (secret.startsWith('alc_') || !this.oauth.enabled) return this.tokens.authenticate(secret);
    return this.oauth.authenticate(secret);
  }
}
