import { Injectable, Logger } from '@nestjs/common';
import { OnGatewayConnection, WebSocketGateway } from '@nestjs/websockets';
import { WebSocket } from 'ws';
import { AlcartaError } from '../kernel/errors';
import { AppConfig } from '../config/app-config';
import { DrainState } from '../lifecycle/drain-state';
import { WaitService } from '../waits/wait.service';
import { TicketedRequest } from './wait-socket.adapter';
import { WAIT_SOCKET_PATH } from './wait-socket-url';

/** Close codes of RFC 6455: done, "policy violation" (the token lost its access), "service restart". */
const NORMAL_CLOSURE = 1000;
const POLICY_VIOLATION = 1008;
const SERVICE_RESTART = 1012;
const INTERNAL_ERROR = 1011;
/** If no replica fixed the result by the wait's end (database trouble), the socket gives up this much later. */
const RESULT_GRACE_MS = 60_000;
/** How long a drain waits for clients to acknowledge the closing frames. */
const CLOSE_GRACE_MS = 1_000;

/**
 * Delivers one persisted wait over a websocket: `{"type":"ready"}` on connect, then exactly one
 * `{"type":"result", …}` — the wait's fixed result, the same `email_await {wait_id}` returns — and
 * close 1000. Pings keep proxies from timing out an idle socket. On shutdown the socket gets a
 * result with `shutdown: true` and close 1012; the wait itself lives on for the other replicas.
 * When the wait's token is revoked or expires, the socket gets `{"type":"error","error":
 * "unauthorized","reason":…}` instead of a result, and close 1008.
 */
@WebSocketGateway({ path: WAIT_SOCKET_PATH })
@Injectable()
export class WaitSocketGateway implements OnGatewayConnection<WebSocket> {
  private readonly logger = new Logger(WaitSocketGateway.name);
  private readonly open = new Set<WebSocket>();

  constructor(
    private readonly waits: WaitService,
    private readonly config: AppConfig,
    drain: DrainState,
  ) {
    drain.onDrain(() => this.closed());
  }

  async handleConnection(socket: WebSocket, req: TicketedRequest): Promise<void> {
    const { wait, credential } = req.ticket!;
    this.open.add(socket);
    const abort = new AbortController();
    /** Until the result is in: a close after it has nobody to stop (and abort() costs an exception object). */
    let waiting = true;
    const ping = setInterval(() => socket.ping(), this.config.keepaliveMs);
    socket.once('close', () => {
      clearInterval(ping);
      if (waiting) abort.abort();
      this.open.delete(socket);
    });
    socket.send(JSON.stringify({ type: 'ready', wait_id: wait.id }));
    try {
      const result = await this.waits.awaitResult(wait, {
        credential,
        delivery: 'websocket',
        timeoutMs: Math.max(0, wait.expiresAt.getTime() - Date.now()) + RESULT_GRACE_MS,
        signal: abort.signal,
      });
      waiting = false;
      if (socket.readyState !== WebSocket.OPEN) return;
      socket.send(JSON.stringify({ type: 'result', ...result }));
      socket.close(result.shutdown ? SERVICE_RESTART : NORMAL_CLOSURE);
    } catch (err) {
      waiting = false;
      if (err instanceof AlcartaError && err.code === 'unauthorized') {
        if (socket.readyState !== WebSocket.OPEN) return;
        socket.send(JSON.stringify({ type: 'error', ...err.toBody() }));
        socket.close(POLICY_VIOLATION, err.reason);
        return;
      }
      this.logger.error(err instanceof Error ? err : String(err));
      if (socket.readyState === WebSocket.OPEN) socket.close(INTERNAL_ERROR, 'poll email_await with the wait_id');
    }
  }

  /** Resolves once every socket has closed (the drain has sent their results), or after a grace. */
  private async closed(): Promise<void> {
    const deadline = Date.now() + CLOSE_GRACE_MS;
    while (this.open.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }
}
