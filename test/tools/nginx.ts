import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, until } from '#app/common/net.js';
import { nginxPath } from '../support/system-packages';

/**
 * A real nginx in front of Alcarta, run as a child process that owns its own prefix directory
 * (config, pid, logs, every temp path) on a loopback port: the load balancer of the local cluster
 * (`npm run cluster`) and the proxy hop of the end-to-end tests. Needs the nginx binary (Debian:
 * `apt-get install -y nginx-light`).
 *
 * Modes: - `websocket`: configured as docs/agents.md "Waits" asks of every hop: HTTP/1.1 upstream,
 * `Upgrade` and
 *   `Connection` forwarded, response buffering off, long read/send timeouts, `Host` forwarded. A
 *   request that finds its upstream gone (a replica restarting) is retried on the next one.
 * - `strip-upgrade`: a misconfigured hop, for the tests: HTTP/1.1 upstream, but `Upgrade` and
 *   `Connection` are not forwarded, so a websocket handshake arrives as a plain GET.
 */
export type NginxMode = 'websocket' | 'strip-upgrade';

export interface NginxProxy {
  /** `http://127.0.0.1:<port>` of the proxy. */
  url: string;
  port: number;
  /** The access log: one line `<method> <path without query> <status>` per request (no tickets). */
  accessLog(): Promise<string>;
  /** Stops nginx (SIGTERM, SIGKILL after 10 s) and removes its directory. */
  stop(): Promise<void>;
}

/** nginx is missing or could not be started; `summary` is the first line, without the details. */
export class NginxUnavailableError extends Error {
  override name = 'NginxUnavailableError';

  constructor(
    readonly summary: string,
    details: string,
  ) {
    super(`${summary}: ${details}`);
  }
}

const running = new Set<ChildProcess>();
// Whoever started nginx and ended half-way must not leave it behind (the master stops its worker).
process.on('exit', () => {
  for (const child of running) child.kill('SIGTERM');
});

/** The nginx binary: on PATH, or in the sbin directories a non-root PATH often lacks. */
function findNginx(): string {
  const found = nginxPath();
  if (found) return found;
  throw new NginxUnavailableError(
    'nginx is not installed',
    'install it (Debian/Ubuntu: apt-get install -y nginx-light)',
  );
}

/** Modules compiled out of this nginx (`--without-http_<name>_module`): their directives would be errors. */
function missingModules(binary: string): Set<string> {
  const version = spawnSync(binary, ['-V'], { encoding: 'utf8' });
  if (version.error || version.status !== 0) {
    throw new NginxUnavailableError(
      `nginx at ${binary} does not run`,
      version.error?.message ?? `${version.stderr}`.trim(),
    );
  }
  return new Set([...`${version.stderr}`.matchAll(/--without-http_(\w+)_module/g)].map((m) => m[1]));
}

function config(
  dir: string,
  port: number,
  upstreams: string[],
  mode: NginxMode,
  missing: Set<string>,
  workerConnections: number | undefined,
  workers: number,
): string {
  const tempPaths = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .filter((name) => name === 'client_body' || !missing.has(name))
    .map((name) => `  ${name}_temp_path ${join(dir, `${name}_temp`)};`);
  const hop =
    mode === 'websocket'
      ? [
          'proxy_http_version 1.1;',
          'proxy_set_header Upgrade $http_upgrade;',
          'proxy_set_header Connection $connection_upgrade;',
          'proxy_buffering off;',
          'proxy_request_buffering off;',
          'proxy_read_timeout 14400s;',
          'proxy_send_timeout 14400s;',
          // A replica that went away mid-restart: try the next one (also for POST; nothing reached it).
          'proxy_next_upstream error timeout non_idempotent;',
        ]
      : [
          // What a proxy configured for plain HTTP does: nginx passes neither hop-by-hop header
          // unless told to; written out here so the behaviour does not depend on that default.
          'proxy_http_version 1.1;',
          'proxy_set_header Upgrade "";',
          'proxy_set_header Connection "";',
        ];
  return [
    // As root, the worker would drop to nobody and could not use the temp paths in our 0700 dir.
    ...(process.getuid?.() === 0 ? ['user root;'] : []),
    `worker_processes ${workers};`,
    'daemon off;',
    `pid ${join(dir, 'nginx.pid')};`,
    `lock_file ${join(dir, 'nginx.lock')};`,
    `error_log ${join(dir, 'error.log')} warn;`,
    // Every proxied request holds two connections (client and upstream), each a file: a worker
    // given more connections raises its own soft file limit to fit them (the hard limit stays: more
    // connections than it allows take more workers).
    ...(workerConnections ? [`worker_rlimit_nofile ${workerConnections + 1024};`] : []),
    `events { worker_connections ${workerConnections ?? 4096}; }`,
    'http {',
    // $uri, not $request: websocket URLs carry their ticket in the query.
    "  log_format alcarta '$request_method $uri $status';",
    `  access_log ${join(dir, 'access.log')} alcarta;`,
    ...tempPaths,
    '  map $http_upgrade $connection_upgrade { default upgrade; "" close; }',
    '  upstream alcarta {',
    ...upstreams.map((u) => `    server ${new URL(u).host} max_fails=1 fail_timeout=2s;`),
    '  }',
    '  server {',
    // With several workers, the kernel spreads new connections evenly over them.
    `    listen 127.0.0.1:${port}${workers > 1 ? ' reuseport' : ''};`,
    '    location / {',
    '      proxy_pass http://alcarta;',
    '      proxy_set_header Host $http_host;',
    '      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
    '      proxy_set_header X-Forwarded-Proto $scheme;',
    ...hop.map((line) => `      ${line}`),
    '    }',
    '  }',
    '}',
    '',
  ].join('\n');
}

/**
 * Starts nginx on `127.0.0.1:<port>` (a free one unless given: pass it when the upstreams must know
 * their public URL in advance) balancing over `upstreams`, and waits until it answers.
 */
export async function startNginx(options: {
  upstreams: string[];
  mode: NginxMode;
  port?: number;
  /** Connections each worker may hold, client and upstream sides together (default 4096). */
  workerConnections?: number;
  /** Worker processes (default 1): each has its own file limit. */
  workers?: number;
}): Promise<NginxProxy> {
  const binary = findNginx();
  const missing = missingModules(binary);
  const port = options.port ?? (await freePort());
  const dir = await mkdtemp(join(tmpdir(), 'alcarta-nginx-'));
  const confPath = join(dir, 'nginx.conf');
  await writeFile(
    confPath,
    config(dir, port, options.upstreams, options.mode, missing, options.workerConnections, options.workers ?? 1),
  );

  // -e: the log used before the config is read (the compiled-in default may be unwritable).
  const child = spawn(binary, ['-p', dir, '-c', confPath, '-e', join(dir, 'error.log')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  let exit: string | undefined;
  const exited = new Promise<void>((resolveExit) => {
    child.once('error', (err) => {
      exit = err.message;
      running.delete(child);
      resolveExit();
    });
    child.once('exit', (code, signal) => {
      exit = `exit code ${code ?? signal}`;
      running.delete(child);
      resolveExit();
    });
  });
  const errorLog = () => readFile(join(dir, 'error.log'), 'utf8').catch(() => '');

  const stop = async () => {
    if (running.has(child)) child.kill('SIGTERM');
    const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(force);
    await rm(dir, { recursive: true, force: true });
  };

  const url = `http://127.0.0.1:${port}`;
  try {
    await until(
      'nginx to answer',
      async () => {
        if (exit !== undefined) return true;
        const res = await fetch(`${url}/health/live`, { signal: AbortSignal.timeout(2000) });
        await res.arrayBuffer();
        return (res.headers.get('server') ?? '').startsWith('nginx');
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
  } catch (err) {
    const log = await errorLog();
    await stop();
    throw new NginxUnavailableError('nginx did not start', `${(err as Error).message}\n${output}${log}`);
  }
  if (exit !== undefined) {
    const log = await errorLog();
    await stop();
    throw new NginxUnavailableError('nginx did not start', `${exit}\n${output}${log}`);
  }

  return { url, port, accessLog: () => readFile(join(dir, 'access.log'), 'utf8').catch(() => ''), stop };
}
