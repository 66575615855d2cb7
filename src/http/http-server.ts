import { createServer, RequestListener, Server } from 'node:http';
import { Socket } from 'node:net';
import { NextFunction, Request, RequestHandler, Response } from 'express';
import { ExpressAdapter } from '@nestjs/platform-express';
import { AppConfig } from '../config/app-config';

export interface ConnectionLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  unreadResponseTimeoutMs: number;
  listenBacklog: number;
}

export function connectionLimits(config: AppConfig): ConnectionLimits {
  return {
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    unreadResponseTimeoutMs: config.unreadResponseTimeoutMs,
    listenBacklog: config.listenBacklog,
  };
}

/**
 * Nest's Express adapter with an HTTP server built for slow and stuck clients (docs/operators.md,
 * "Limits and hardening"). Node enforces `headersTimeout` and `requestTimeout` only when it checks
 * its connections, every `connectionsCheckingInterval` (30 s by default, a constructor option):
 * that is why the server is created here instead of by Nest. Once a request has arrived in full,
 * neither limit applies any more, so a parked wait (its response open for hours) and an upgraded
 * websocket are not cut. It listens with ALCARTA_LISTEN_BACKLOG: with Node's default of 511, a
 * burst of thousands of new connections (agents opening their waits at once) overflows the kernel's
 * accept queue, and the dropped connection attempts come back only after TCP's retransmission
 * delays (1 s, 3 s, 7 s), beyond many clients' connect timeouts.
 */
export class AlcartaExpressAdapter extends ExpressAdapter {
  private unread: UnreadResponseGuard | undefined;

  constructor(private readonly limits: ConnectionLimits) {
    super();
  }

  override initHttpServer(): void {
    const server = createServer(
      {
        headersTimeout: this.limits.headersTimeoutMs,
        requestTimeout: this.limits.requestTimeoutMs,
        // Checked every second, so a limit holds to within a second.
        connectionsCheckingInterval: 1000,
      },
      this.getInstance<RequestListener>(),
    );
    this.unread = new UnreadResponseGuard(server, this.limits.unreadResponseTimeoutMs);
    this.setHttpServer(server);
  }

  override listen(port: string | number, callback?: () => void): Server;
  override listen(port: string | number, hostname: string, callback?: () => void): Server;
  override listen(port: string | number, hostOrCallback?: string | (() => void), callback?: () => void): Server {
    const host = typeof hostOrCallback === 'string' ? hostOrCallback : undefined;
    return (this.getHttpServer() as Server).listen(
      { port: Number(port), host, backlog: this.limits.listenBacklog },
      typeof hostOrCallback === 'function' ? hostOrCallback : callback,
    );
  }

  override close(): Promise<unknown> | undefined {
    this.unread?.stop();
    return super.close();
  }
}

/**
 * Abandons responses that the client stopped reading. Data the kernel will not take (the client's
 * receive window is full) piles up in the socket's buffer: a 50 MB answer stays in memory for as
 * long as the client likes. A socket whose pending output has not moved for the limit is destroyed,
 * which releases the buffer. Progress is measured on what the kernel accepts, so a slow reader that
 * keeps reading is not cut, and idle sockets (parked waits, quiet websockets) have nothing pending.
 */
class UnreadResponseGuard {
  private readonly sockets = new Map<Socket, { pending: number; since: number }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    server: Server,
    private readonly limitMs: number,
  ) {
    server.on('connection', (socket: Socket) => {
      // A connection handed back to the server after a declined upgrade (serveDeclinedUpgrade) is watched already.
      if (this.sockets.has(socket)) return;
      this.sockets.set(socket, { pending: 0, since: 0 });
      socket.once('close', () => this.sockets.delete(socket));
    });
    this.timer = setInterval(() => this.sweep(), Math.min(1000, Math.max(100, limitMs / 4))).unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private sweep(): void {
    const now = Date.now();
    for (const [socket, state] of this.sockets) {
      const pending = pendingBytes(socket);
      // Output that shrank was read; output that only grew (keep-alive comments) was not.
      if (state.pending === 0 || pending < state.pending) state.since = now;
      state.pending = pending;
      if (pending > 0 && now - state.since >= this.limitMs) {
        socket.destroy();
        this.sockets.delete(socket);
      }
    }
  }
}

/**
 * Bytes written by the application that the kernel has not taken yet: libuv's write queue (which
 * shrinks as a slow reader reads, even within one large write) plus the stream's own buffer.
 */
function pendingBytes(socket: Socket): number {
  const handle = (socket as unknown as { _handle?: { writeQueueSize?: number } })._handle;
  return (handle?.writeQueueSize ?? 0) + socket.writableLength;
}

/**
 * While the replica drains, every response closes its connection: new ones say `Connection: close`,
 * and a connection whose response started before the drain is closed once that response is done.
 * Otherwise a client reusing one keep-alive connection (a prober every 50 ms) keeps it open, and
 * `server.close()` waits for it until the grace period kills the process.
 */
export function closeConnectionsWhileDraining(isDraining: () => boolean): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    if (isDraining()) res.setHeader('Connection', 'close');
    res.once('finish', () => {
      if (isDraining()) req.socket.end();
    });
    next();
  };
}
