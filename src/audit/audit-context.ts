import { AsyncLocalStorage } from 'node:async_hooks';
import { NextFunction, Request, Response } from 'express';

interface AuditContext {
  clientAddress: string | null;
}

const storage = new AsyncLocalStorage<AuditContext>();

/**
 * Remembers the HTTP request's client address (`req.ip`: the peer, or the client a trusted proxy
 * names) for the audit entries its handler appends, so the services that record acts need no
 * request parameter. Installed after the body parsers: a context entered before them is lost in
 * the request stream's callbacks.
 */
export function auditRequestContext(req: Request, _res: Response, next: NextFunction): void {
  storage.run({ clientAddress: req.ip ?? req.socket.remoteAddress ?? null }, next);
}

/** The client address of the HTTP request being handled; null outside one (the CLI, background jobs). */
export function currentClientAddress(): string | null {
  return storage.getStore()?.clientAddress ?? null;
}
