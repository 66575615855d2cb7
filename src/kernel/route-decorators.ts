import { createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import { Request } from 'express';
import { Caller } from './caller';
import { Scope } from './scopes';

export const PUBLIC_ROUTE = 'alcarta:public';
export const REQUIRED_SCOPES = 'alcarta:scopes';

/** The route needs no token (health, metrics). */
export const Public = () => SetMetadata(PUBLIC_ROUTE, true);

/** The token needs at least one of these scopes (`admin` always qualifies). */
export const RequireScopes = (...scopes: Scope[]) => SetMetadata(REQUIRED_SCOPES, scopes);

export interface AuthenticatedRequest extends Request {
  caller?: Caller;
}

/** The Caller the bearer guard attached to this request. */
export const CurrentCaller = createParamDecorator((_: unknown, ctx: ExecutionContext): Caller => {
  const caller = ctx.switchToHttp().getRequest<AuthenticatedRequest>().caller;
  if (!caller) throw new Error('CurrentCaller used on a public route');
  return caller;
});
