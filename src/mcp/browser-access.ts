import { NextFunction, Request, RequestHandler, Response } from 'express';
import { AppConfig } from '../config/app-config';
import { isMcpPath } from '../kernel/json-rpc';

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** What a browser page may send to /mcp: the bearer header and the Streamable HTTP headers. */
const ALLOW_HEADERS = [
  'authorization',
  'content-type',
  'accept',
  'mcp-protocol-version',
  'mcp-session-id',
  'last-event-id',
  'mcp-method',
  'mcp-name',
].join(', ');
/** What page scripts may read: the auth challenge, the revision, and when to retry a 429/503. */
const EXPOSE_HEADERS = 'www-authenticate, mcp-protocol-version, retry-after';
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/**
 * Browser access to /mcp (docs/operators.md, "Limits and hardening"): CORS for allowed origins —
 * loopback (so local tools such as the MCP Inspector work) and ALCARTA_ALLOWED_ORIGINS — and 403
 * for every other origin, which is also the endpoint's DNS-rebinding protection. Requests without
 * an Origin header come from agents, not browsers, and pass untouched. It runs before body parsing
 * and authentication, so that every answer a page can get (a preflight, a 401, a parse error, a
 * result) carries the CORS headers and the page can read it.
 */
export function mcpBrowserAccess(config: AppConfig): RequestHandler {
  const allowed = new Set(config.allowedOrigins.map(normalise));
  const isAllowed = (origin: string): boolean => {
    if (allowed.has(normalise(origin))) return true;
    try {
      const url = new URL(origin);
      return (url.protocol === 'http:' || url.protocol === 'https:') && LOOPBACK_HOSTS.has(url.hostname);
    } catch {
      return false;
    }
  };

  return (req: Request, res: Response, next: NextFunction) => {
    if (!isMcpPath(req.path)) return next();
    const origin = req.headers.origin;
    res.vary('Origin');
    if (origin === undefined) {
      if (req.method !== 'OPTIONS') return next();
      res.status(204).setHeader('Allow', 'POST').end();
      return;
    }
    if (!isAllowed(origin)) {
      res.status(403).json({
        error: 'forbidden',
        reason: 'origin_not_allowed',
        message: `Origin ${origin} may not use this endpoint; add it to ALCARTA_ALLOWED_ORIGINS.`,
      });
      return;
    }
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Access-Control-Expose-Headers', EXPOSE_HEADERS);
    if (req.method !== 'OPTIONS') return next();
    res.setHeader('Access-Control-Allow-Methods', 'POST');
    res.setHeader('Access-Control-Allow-Headers', ALLOW_HEADERS);
    res.setHeader('Access-Control-Max-Age', String(PREFLIGHT_MAX_AGE_SECONDS));
    res.status(204).end();
  };
}

function normalise(origin: string): string {
  return origin.trim().replace(/\/+$/, '').toLowerCase();
}
