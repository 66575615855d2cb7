import { NextFunction, Request, RequestHandler, Response } from 'express';
import { Logger } from 'pino';
import { AuthenticatedRequest } from '../kernel/route-decorators';
import { maskSecretPath } from '../logging/secret-masking';

/**
 * One JSON line per HTTP request, written when its response ends: request id, method, path,
 * caller, status, duration. Headers, query strings and bodies are deliberately not logged: they
 * carry bearer secrets, websocket tickets, OpenID Connect codes and mail. A secret in the path
 * itself is masked: an approval link (`/console/links/<token>`) works until its request is decided,
 * so whoever reads the logs could otherwise decide it; `DELETE /v1/tokens/alc_…` keeps its prefix
 * (`alc_[REDACTED]`). The caller is named by ids only (token id, or OAuth principal, subject and
 * client), never by its token.
 *
 * The line is built from the root logger at the end, with no per-request child loggers (which is
 * what pino-http keeps on every request): a parked wait holds its request for minutes or hours,
 * and three child loggers with their own hidden classes cost several KiB per parked wait.
 */
export function requestLogger(logger: Logger): RequestHandler {
  let lastId = 0;
  return (req: Request, res: Response, next: NextFunction) => {
    const reqId = ++lastId;
    const startedAt = Date.now();
    const done = () => {
      const failed = res.statusCode >= 500;
      const level = failed ? 'error' : 'info';
      // Below the configured level the line is not built at all (thousands of waits end at once).
      if (!logger.isLevelEnabled(level)) return;
      const caller = (req as AuthenticatedRequest).caller;
      logger[level](
        {
          reqId,
          req: { method: req.method, path: maskSecretPath((req.originalUrl ?? req.url ?? '').split('?')[0]) },
          ...(caller && { caller: caller.logIdentity }),
          res: { status: res.statusCode },
          ...(failed && { err: new Error(`failed with status code ${res.statusCode}`) }),
          responseTime: Date.now() - startedAt,
        },
        failed ? 'request failed' : 'request completed',
      );
    };
    // A response emits 'close' once, after it finished or when its connection went away first; one
    // listener that stays is cheaper than two that remove each other (thousands of waits end at once).
    res.on('close', done);
    next();
  };
}
