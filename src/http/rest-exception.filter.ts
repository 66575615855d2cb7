import { ErrorCode as JsonRpcErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import { Request, Response } from 'express';
import { AlcartaError, ErrorCode } from '../kernel/errors';
import { insufficientScopeChallenge, unauthorizedChallenge } from '../kernel/protected-resource-metadata';
import { AppConfig } from '../config/app-config';
import { databaseFailureError } from '../database/database-errors';
import { maskSecretPath, maskSecretsInEcho } from '../logging/secret-masking';
import { isMcpPath, refusalOf, SERVER_ERROR } from '../kernel/json-rpc';

const STATUS: Record<ErrorCode, HttpStatus> = {
  invalid_request: HttpStatus.BAD_REQUEST,
  unauthorized: HttpStatus.UNAUTHORIZED,
  forbidden: HttpStatus.FORBIDDEN,
  not_found: HttpStatus.NOT_FOUND,
  conflict: HttpStatus.CONFLICT,
  limit_exceeded: HttpStatus.TOO_MANY_REQUESTS,
  unavailable: HttpStatus.SERVICE_UNAVAILABLE,
  identity_provider_unavailable: HttpStatus.SERVICE_UNAVAILABLE,
};

/** Seconds a client should wait before retrying a 503 (database outage, draining) that names no other time. */
export const RETRY_AFTER_SECONDS = 5;

/**
 * JSON-RPC error codes for HTTP-level refusals of /mcp: the body stays JSON-RPC (docs/operators.md,
 * "Limits and hardening").
 */
const JSONRPC_CODE: Partial<Record<number, number>> = {
  400: JsonRpcErrorCode.InvalidParams,
  429: SERVER_ERROR,
  503: SERVER_ERROR,
};

/**
 * Every HTTP error leaves as `{"error", "reason", "message"}` JSON. Unexpected failures are logged
 * with their stack and answered with a bare 500, so no internals reach a client. Messages that echo
 * the request (an unknown route, a path the router could not decode) are masked like the request
 * log: error bodies end up in client logs and proxies, and a path may carry a link token.
 */
@Catch()
export class RestExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger(RestExceptionFilter.name);

  constructor(private readonly config: AppConfig) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const req = host.switchToHttp().getRequest<Request>();
    if (res.headersSent) {
      res.end();
      return;
    }
    const { status, body } = this.describe(exception, req);
    if (status === HttpStatus.UNAUTHORIZED) {
      const tokenSent = /^Bearer\s+\S/i.test(req.headers.authorization ?? '');
      res.setHeader(
        'WWW-Authenticate',
        unauthorizedChallenge(this.config, tokenSent, isMcpPath(req.path) ? 'mcp' : 'rest'),
      );
    }
    if (status === HttpStatus.FORBIDDEN && body.reason === 'missing_scope' && Array.isArray(body.required_scopes)) {
      res.setHeader('WWW-Authenticate', insufficientScopeChallenge(this.config, body.required_scopes.map(String)));
    }
    if (status === HttpStatus.SERVICE_UNAVAILABLE)
      res.setHeader('Retry-After', String(Number(body.retry_after_seconds ?? RETRY_AFTER_SECONDS)));
    if (status === HttpStatus.TOO_MANY_REQUESTS)
      res.setHeader('Retry-After', String(Number(body.retry_after_seconds ?? 1)));
    if (
      isMcpPath(req.path) &&
      (status === HttpStatus.SERVICE_UNAVAILABLE ||
        status === HttpStatus.TOO_MANY_REQUESTS ||
        status === HttpStatus.INTERNAL_SERVER_ERROR)
    ) {
      const code = JSONRPC_CODE[status] ?? JsonRpcErrorCode.InternalError;
      res.status(status).json(refusalOf(req.body, code, String(body.message ?? body.error), body));
      return;
    }
    res.status(status).json(body);
  }

  private describe(exception: unknown, req: Request): { status: HttpStatus; body: Record<string, unknown> } {
    if (exception instanceof AlcartaError) return { status: STATUS[exception.code], body: exception.toBody() };
    if (exception instanceof HttpException) {
      const status = exception.getStatus() as HttpStatus;
      if (status === HttpStatus.NOT_FOUND) {
        return {
          status,
          body: {
            error: 'not_found',
            reason: 'no_such_route',
            message: `No route ${req.method} ${maskSecretPath(req.path)}.`,
          },
        };
      }
      // Terminus answers a failed readiness check with a 503 whose body is the health report: load
      // balancers and probes need both, so it must not turn into a bare 500.
      if (status === HttpStatus.SERVICE_UNAVAILABLE) {
        const report = exception.getResponse();
        return {
          status,
          body:
            typeof report === 'object'
              ? (report as Record<string, unknown>)
              : { error: 'unavailable', message: report },
        };
      }
      if (status < HttpStatus.INTERNAL_SERVER_ERROR) {
        // The router's and parsers' messages quote the request (`Failed to decode param '…'`).
        return {
          status,
          body: { error: 'invalid_request', reason: 'http_error', message: maskSecretsInEcho(exception.message) },
        };
      }
    }
    const failure = databaseFailureError(exception);
    if (failure) return { status: STATUS[failure.code], body: failure.toBody() };
    this.logger.error(exception instanceof Error ? exception : String(exception));
    return {
      status: HttpStatus.INTERNAL_SERVER_ERROR,
      body: { error: 'internal_error', message: 'The server failed to handle this request.' },
    };
  }
}
