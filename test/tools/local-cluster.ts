import { ChildProcess, spawn } from 'node:child_process';
import { freePort, until } from '#app/common/net.js';
import { appEntryArgs } from '../support/app-entry';
import { recordSecretSettings, SpawnedServerLog } from '../support/test-logs';
import { NginxProxy, startNginx } from './nginx';

export interface ClusterOptions {
  replicas: number;
  /** The balancer's port (0: any free one). */
  port: number;
  databaseUrl: string;
  /**
   * Proxied requests the balancer must hold at once (by default about 2,000: one nginx worker of
   * 4096 connections, two per request). More take more workers, each within the file limit.
   */
  balancerRequests?: number;
  /** Extra settings for every replica. */
  env?: Record<string, string>;
  /** Where each replica's output goes (by default, this process's, prefixed). */
  output?: (replica: number, stream: 'stdout' | 'stderr', chunk: string) => void;
}

export interface Replica {
  readonly index: number;
  readonly url: string;
  readonly pid: number | undefined;
  readonly running: boolean;
  /** Sends `signal` (default SIGTERM) and resolves with the exit code once it exited. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Starts it again on the same port; resolves once /health/ready answers 200. */
  start(): Promise<void>;
}

export interface LocalCluster {
  /** The balancer: what clients use, and every replica's ALCARTA_PUBLIC_URL. */
  readonly url: string;
  readonly replicas: readonly Replica[];
  stop(): Promise<void>;
}

/**
 * N replicas of the server on one PostgreSQL behind an nginx load balancer on loopback — the way
 * Alcarta runs in Kubernetes, on one machine. Every replica is a real server process (`node
 * dist/main.js`, or src/main.ts from source) that can be stopped (SIGTERM: graceful drain) and
 * started again.
 */
export async function startLocalCluster(options: ClusterOptions): Promise<LocalCluster> {
  const balancerPort = options.port || (await freePort());
  const balancerUrl = `http://127.0.0.1:${balancerPort}`;
  const ports = await Promise.all(Array.from({ length: options.replicas }, () => freePort()));
  const replicas = ports.map(
    (port, index) =>
      new ReplicaProcess(
        index + 1,
        port,
        {
          ...process.env,
          // The replicas share one machine: one SMTP port cannot serve them all.
          ALCARTA_SMTP_PORT: 'off',
          ...options.env,
          DATABASE_URL: options.databaseUrl,
          PORT: String(port),
          ALCARTA_HOST: '127.0.0.1',
          ALCARTA_PUBLIC_URL: balancerUrl,
        },
        options.output ?? defaultOutput,
      ),
  );
  let nginx: NginxProxy | undefined;
  try {
    // One at a time: the first applies the migrations and creates the bootstrap admin token.
    for (const replica of replicas) await replica.start();
    nginx = await startNginx({
      upstreams: replicas.map((r) => r.url),
      mode: 'websocket',
      port: balancerPort,
      ...balancerWorkers(options.balancerRequests),
    });
  } catch (err) {
    await Promise.all(replicas.map((r) => r.stop()));
    throw err;
  }
  const balancer = nginx;
  return {
    url: balancer.url,
    replicas,
    stop: async () => {
      await Promise.all(replicas.map((r) => r.stop()));
      await balancer.stop();
    },
  };
}

/** Workers of at most 4,000 proxied requests each (8,000 connections and files, well within common limits). */
function balancerWorkers(requests: number | undefined): { workers?: number; workerConnections?: number } {
  if (!requests) return {};
  const workers = Math.ceil(requests / 4000);
  // The kernel spreads connections over the workers evenly, not exactly: leave room.
  return { workers, workerConnections: Math.ceil((2 * requests * 1.25) / workers) + 1024 };
}

class ReplicaProcess implements Replica {
  private child: ChildProcess | undefined;
  private exited: Promise<number | null> = Promise.resolve(null);

  constructor(
    readonly index: number,
    private readonly port: number,
    private readonly env: NodeJS.ProcessEnv,
    private readonly output: NonNullable<ClusterOptions['output']>,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  async start(): Promise<void> {
    if (this.child) return;
    // In a test run, the replica's whole log goes to the run's log scan (see test/support/test-logs.ts).
    recordSecretSettings(this.env);
    const log = SpawnedServerLog.for(this.env);
    const child = spawn(process.execPath, appEntryArgs('main'), {
      env: { ...this.env, ...log?.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const shown = log ? log.stdout(child.pid!, chunk) : chunk;
      if (shown !== '') this.output(this.index, 'stdout', shown);
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      log?.stderr(child.pid!, chunk);
      this.output(this.index, 'stderr', chunk);
    });
    this.exited = new Promise((resolve) =>
      child.once('exit', (code) => {
        if (this.child === child) this.child = undefined;
        resolve(code);
      }),
    );
    await until(
      `replica ${this.index} to be ready`,
      async () => {
        if (this.child !== child) throw new Error(`replica ${this.index} exited during start`);
        const res = await fetch(`${this.url}/health/ready`, { signal: AbortSignal.timeout(2000) });
        await res.arrayBuffer();
        return res.status === 200;
      },
      { timeoutMs: 60_000 },
    ).catch(async (err: Error) => {
      await this.stop('SIGKILL');
      throw err;
    });
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const child = this.child;
    if (!child) return this.exited;
    child.kill(signal);
    const force = setTimeout(() => child.kill('SIGKILL'), 30_000);
    try {
      return await this.exited;
    } finally {
      clearTimeout(force);
    }
  }
}

function defaultOutput(replica: number, stream: 'stdout' | 'stderr', chunk: string): void {
  const target = stream === 'stdout' ? process.stdout : process.stderr;
  for (const line of chunk.split('\n')) if (line) target.write(`[replica ${replica}] ${line}\n`);
}
