import { NextFunction, Request, RequestHandler, Response } from 'express';
import { Metrics } from '../metrics/metrics';

/** Records every HTTP request's duration under its route pattern (not its path: ids would explode). */
export function requestMetrics(metrics: Metrics): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const stop = metrics.httpDuration.startTimer();
    // 'finish' is emitted once: a plain listener spares the once() wrapper and its removal.
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      stop({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  };
}
