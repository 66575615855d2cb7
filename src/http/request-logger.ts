import { Request, RequestHandler, Response } from 'express';
import { Logger } from 'pino';
import pinoHttp from 'pino-http';
import { AuthenticatedRequest } from '../auth/auth.decorators';
import { serializeError } from '../logging/logger';

/**
 * One JSON line per HTTP request: method, path, status, duration. Headers, query strings and bodies
 * are deliberately not logged: they carry bearer secrets, websocket tickets and mail. A secret in
 * the path itself (`DELETE /v1/tokens/alc_…`) is masked when the line is written (logger.ts).
 * The caller is named by ids only (token id, or OAuth principal, subject and client), never by its token.
 */
export function requestLogger(logger: Logger): RequestHandler {
  return pinoHttp({
    logger,
    quietReqLogger: true,
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : 'info'),
    customSuccessMessage: () => 'request completed',
    customErrorMessage: () => 'request failed',
    serializers: {
      req: (req: Request) => ({ method: req.method, path: (req.originalUrl ?? req.url ?? '').split('?')[0] }),
      res: (res: Response) => ({ status: res.statusCode }),
      err: serializeError,
    },
    wrapSerializers: false,
    customProps: (req) => {
      const caller = (req as AuthenticatedRequest).caller;
      return caller ? { caller: caller.logIdentity } : {};
    },
  });
}
