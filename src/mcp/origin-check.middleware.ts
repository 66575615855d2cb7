import { Injectable, NestMiddleware } from '@nestjs/common';
import { NextFunction, Request, Response } from 'express';
import { AppConfig } from '../config/app-config';

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * DNS-rebinding protection for /mcp: a browser page may only reach the endpoint from a loopback
 * origin (so local tools such as the MCP Inspector work) or one listed in ALCARTA_ALLOWED_ORIGINS.
 * Requests without an Origin header come from agents, not browsers, and pass.
 */
@Injectable()
export class OriginCheckMiddleware implements NestMiddleware {
  private readonly allowed: ReadonlySet<string>;

  constructor(config: AppConfig) {
    this.allowed = new Set(config.allowedOrigins.map(normalise));
  }

  use(req: Request, res: Response, next: NextFunction): void {
    const origin = req.headers.origin;
    if (origin === undefined || this.isAllowed(origin)) return next();
    res.status(403).json({
      error: 'forbidden',
      reason: 'origin_not_allowed',
      message: `Origin ${origin} may not use this endpoint; add it to ALCARTA_ALLOWED_ORIGINS.`,
    });
  }

  private isAllowed(origin: string): boolean {
    if (this.allowed.has(normalise(origin))) return true;
    try {
      const url = new URL(origin);
      return (url.protocol === 'http:' || url.protocol === 'https:') && LOOPBACK_HOSTS.has(url.hostname);
    } catch {
      return false;
    }
  }
}

function normalise(origin: string): string {
  return origin.trim().replace(/\/+$/, '').toLowerCase();
}
