import { AddressInfo, createConnection, createServer, Server, Socket } from 'node:net';

/**
 * A TCP relay in front of a server (PostgreSQL, an IMAP server) that a test can turn into a
 * blackhole: existing connections are cut and new ones are accepted but never answered, as when
 * the host stops answering on the network (a connect then hangs instead of being refused), and
 * back into a relay, as when the network returns.
 */
export class TcpProxy {
  private blackholed = false;
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly tap: ((fromClient: Buffer) => void) | undefined,
  ) {}

  /** `tap` sees every byte the clients send, as it passes (to count an IMAP client's commands, say). */
  static async start(
    target: { host: string; port: number },
    { tap }: { tap?: (fromClient: Buffer) => void } = {},
  ): Promise<TcpProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new TcpProxy(server, (server.address() as AddressInfo).port, tap);
    server.on('connection', (client: Socket) => proxy.accept(client, target));
    return proxy;
  }

  /** `url` with its host and port replaced by this relay's. */
  rewrite(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  blackhole(): void {
    this.blackholed = true;
    for (const socket of this.sockets) socket.destroy();
  }

  /** Relays new connections again (those accepted while blackholed stay unanswered). */
  restore(): void {
    this.blackholed = false;
  }

  async close(): Promise<void> {
    this.blackhole();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => undefined);
    if (this.blackholed) return;
    const upstream = createConnection(target);
    this.sockets.add(upstream);
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => undefined);
    client.on('close', () => upstream.destroy());
    if (this.tap) client.on('data', this.tap);
    client.pipe(upstream).pipe(client);
  }
}
