import { Request, RequestHandler, Response } from 'express';
import { Logger } from 'pino';
import pinoHttp from 'pino-http';

/**
 * One JSON line per HTTP request: method, path, status, duration. Headers, query strings and bodies
 * are deliberately not logged: they carry bearer secrets and websocket tickets.
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
    },
    wrapSerializers: false,
  });
}
