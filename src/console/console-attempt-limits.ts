import { Injectable } from '@nestjs/common';
import { NextFunction, Request, RequestHandler, Response } from 'express';
import { Counter } from 'prom-client';
import { AppConfig } from '../config/app-config';
import { clientAddressKey } from '../http/client-address';
import { RateLimiter } from '../http/rate-limiter';
import { Metrics } from '../metrics/metrics';
import { ConsoleViews } from './console-views';

/** What a person tries without a session: open or answer an approval link, or sign in to the console. */
export type ConsoleAttempt = 'link' | 'sign_in';

function failedAsGuess(attempt: ConsoleAttempt, status: number): boolean {
  return attempt === 'link' ? status === 404 : status >= 400;
}

/**
 * Throttles guessing at the doors that need no session: approval links (GET and POST of
 * `/console/links/:token`) and console sign-in (the token form's POST, the start and the callback
 * of OpenID Connect). Each client address (an IPv6 client by its /64) has a bucket per kind of
 * ALCARTA_CONSOLE_ATTEMPTS_PER_MINUTE attempts that refills at that rate. An attempt takes one
 * when it arrives, before any lookup, and gets it back unless it failed in the way a guess fails:
 * a link that is not known (404; a known link that is spent, expired or overtaken was not guessed),
 * a sign-in that did not sign in (any status from 400). So the approvers of a whole office behind
 * one NAT address are never slowed by their own decisions or old mails, while anyone who guesses,
 * or keeps sending broken callbacks that each cost a call to the identity provider, is held to the
 * rate, and a burst sent at once cannot outrun it. Beyond the limit the answer is a 429 page with
 * Retry-After, before any database work.
 *
 * The address is `req.ip`: the connection's peer, or the client a trusted proxy names
 * (ALCARTA_TRUSTED_PROXIES), never a forwarded header anyone can write. Buckets live in memory,
 * per replica, at most 10,000 per limiter (full ones are dropped first).
 */
@Injectable()
export class ConsoleAttemptLimits {
  private readonly limiter: RateLimiter;
  private readonly refused: Counter;

  constructor(
    config: AppConfig,
    private readonly views: ConsoleViews,
    metrics: Metrics,
  ) {
    const perMinute = config.consoleAttemptsPerMinute;
    this.limiter = new RateLimiter(perMinute / 60, perMinute);
    this.refused = new Counter({
      name: 'alcarta_console_attempts_refused_total',
      help: 'Approval-link and console sign-in attempts refused with 429 (too many failed attempts from one address).',
      labelNames: ['attempt'],
      registers: [metrics.registry],
    });
  }

  /** The middleware that holds `attempt`s to the limit. */
  limit(attempt: ConsoleAttempt): RequestHandler {
    return (req: Request, res: Response, next: NextFunction) => {
      const key = `${attempt} ${clientAddressKey(req.ip)}`;
      const retryAfter = this.limiter.take(key);
      if (retryAfter !== undefined) {
        this.refused.inc({ attempt });
        this.refuse(res, attempt, retryAfter);
        return;
      }
      res.once('finish', () => {
        if (!failedAsGuess(attempt, res.statusCode)) this.limiter.refund(key);
      });
      next();
    };
  }

  private refuse(res: Response, attempt: ConsoleAttempt, retryAfter: number): void {
    const wait = `Wait ${retryAfter} second${retryAfter === 1 ? '' : 's'} and try again.`;
    res.status(429).setHeader('Retry-After', String(retryAfter));
    res.type('html').send(
      attempt === 'link'
        ? this.views.render('links/notice', {
            title: 'Too many attempts',
            message: `Too many unknown links were opened from your network. Nothing was decided. ${wait}`,
          })
        : this.views.render('message', {
            title: 'Too many sign-in attempts',
            text: `Too many sign-ins failed from your network. ${wait}`,
            signIn: true,
          }),
    );
  }
}
