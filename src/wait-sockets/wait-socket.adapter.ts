import { INestApplicationContext, Logger } from '@nestjs/common';
import { WsAdapter } from '@nestjs/platform-ws';
import { createServer, IncomingMessage, Server } from 'node:http';
import { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { AppConfig } from '../config/app-config';
import { clientFacingError } from '../database/database-errors';
import { serveDeclinedUpgrade } from '../http/declined-upgrade';
import { DrainState } from '../lifecycle/drain-state';
import { ConsumedTicket } from '../waits/persisted-wait.repository';
import { TicketService } from './ticket.service';

/** The upgrade request after its ticket was consumed: the wait the socket delivers, and for whom. */
export interface TicketedRequest extends IncomingMessage {
  ticket?: ConsumedTicket;
}

type VerifyCallback = (verified: boolean, code?: number, message?: string, headers?: Record<string, string>) => void;

const REFUSAL_STATUS = { ticket_invalid: 401, ticket_consumed: 410, ticket_expired: 410 } as const;

/**
 * `@nestjs/platform-ws`, with the ticket check before the upgrade: a refused handshake gets an
 * HTTP status and a JSON body (docs/agents.md, "Waits") instead of a socket. The ticket is consumed by the one
 * conditional UPDATE in the database, so of many racing connections exactly one is upgraded, on
 * whichever replica they land. Malformed handshakes are answered in JSON too, and consume nothing.
 * Upgrade offers on other paths are served as plain HTTP requests.
 */
export class WaitSocketAdapter extends WsAdapter {
  private readonly log = new Logger(WaitSocketAdapter.name);
  private readonly tickets: TicketService;
  private readonly config: AppConfig;
  private readonly drain: DrainState;
  private readonly upgradeListeners = new Map<Server, (req: IncomingMessage, socket: Duplex, head: Buffer) => void>();

  constructor(app: INestApplicationContext) {
    super(app);
    this.tickets = app.get(TicketService);
    this.config = app.get(AppConfig);
    this.drain = app.get(DrainState);
  }

  /**
   * Nest's adapter destroys the socket of every upgrade request for a path without a websocket
   * server: `Upgrade: websocket` on /mcp, or `Upgrade: h2c` (curl --http2) anywhere, got an empty
   * reply. Here upgrades are taken for the websocket paths only; any other request is served as
   * the plain HTTP/1.1 request it also is (serveDeclinedUpgrade).
   */
  protected override ensureHttpServerExists(port: number, httpServer: Server = createServer()): Server | undefined {
    if (this.httpServersRegistry.has(port)) return undefined;
    this.httpServersRegistry.set(port, httpServer);
    const listener = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const wsServer = this.websocketAt(port, req.url);
      if (wsServer) wsServer.handleUpgrade(req, socket, head, (ws) => wsServer.emit('connection', ws, req));
      else serveDeclinedUpgrade(httpServer, req, socket, head);
    };
    httpServer.on('upgrade', listener);
    this.upgradeListeners.set(httpServer, listener);
    return httpServer;
  }

  override async dispose(): Promise<void> {
    for (const [server, listener] of this.upgradeListeners) server.off('upgrade', listener);
    this.upgradeListeners.clear();
    await super.dispose();
  }

  /** The websocket server for the path of `url` on `port`, if there is one. */
  private websocketAt(port: number, url: string | undefined): WebSocketServer | undefined {
    let pathname: string;
    try {
      pathname = new URL(url ?? '/', 'http://localhost').pathname;
    } catch {
      return undefined;
    }
    const servers = (this.wsServersRegistry.get(port) ?? []) as Array<WebSocketServer & { path: string }>;
    return servers.find((s) => s.path === pathname);
  }

  override create(port: number, options: Record<string, unknown> = {}): WebSocketServer {
    const server = super.create(port, {
      ...options,
      verifyClient: (info: { req: TicketedRequest }, done: VerifyCallback) => void this.verify(info.req, done),
    }) as WebSocketServer;
    server.on('wsClientError', (err: Error, socket: Duplex) => refuse(socket, 400, 'invalid_handshake', err.message));
    return server;
  }

  private async verify(req: TicketedRequest, done: VerifyCallback): Promise<void> {
    const reply = (status: number, body: object) =>
      done(false, status, JSON.stringify(body), { 'Content-Type': 'application/json' });
    if (!this.config.websockets) {
      return reply(404, { error: 'not_found', reason: 'websockets_disabled', message: 'Websockets are off.' });
    }
    // A draining replica would answer `shutdown` at once: leave the single-use ticket for a replica
    // that stays (the load balancer retries elsewhere, or the client does).
    if (this.drain.isDraining) {
      return reply(503, { error: 'unavailable', reason: 'shutting_down', message: 'This replica is shutting down.' });
    }
    const ticket = new URL(req.url ?? '', 'http://localhost').searchParams.get('ticket') ?? '';
    try {
      const outcome = await this.tickets.consume(ticket);
      if (typeof outcome === 'string') {
        return reply(REFUSAL_STATUS[outcome], {
          error: 'invalid_request',
          reason: outcome,
          message: MESSAGES[outcome],
        });
      }
      req.ticket = outcome;
      done(true);
    } catch (err) {
      // An unreachable database is expected news during an outage; anything else is a bug to log.
      if (clientFacingError(err)?.code !== 'unavailable') this.log.error(err instanceof Error ? err : String(err));
      reply(503, { error: 'unavailable', message: 'The ticket could not be checked; try again.' });
    }
  }
}

const MESSAGES = {
  ticket_invalid: 'This websocket URL is not valid.',
  ticket_consumed: 'This websocket URL was used already; it is single-use. Poll email_await with the wait_id.',
  ticket_expired: 'This websocket URL was not opened before its connect_deadline. Poll email_await with the wait_id.',
};

function refuse(socket: Duplex, status: number, reason: string, message: string): void {
  const body = JSON.stringify({ error: 'invalid_request', reason, message });
  socket.end(
    `HTTP/1.1 ${status} Bad Request\r\nConnection: close\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
