import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { AppConfig } from '#app/config/app-config.js';
import { validateEnvironment } from '#app/config/environment.js';
import { LocalDatabase, openEmbeddedPostgres } from '#app/database/embedded-postgres.js';
import { startLocalCluster } from './local-cluster';

const USAGE = `Usage: npm run cluster -- [--replicas N] [--port P]

Starts N replicas of Alcarta (default 2) on one PostgreSQL (DATABASE_URL, or an embedded one with
its data under ALCARTA_DATA_DIR/cluster) behind an nginx load balancer on 127.0.0.1:P (default 8080).
Needs nginx (Debian: apt-get install -y nginx-light). Ctrl-C stops everything.`;

/**
 * `npm run cluster`: try Alcarta the way it runs in Kubernetes. Stop a replica with
 * `kill -TERM <pid>` to watch clients ride through a graceful shutdown; it is restarted after 5 s.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      replicas: { type: 'string', default: '2' },
      port: { type: 'string', default: '8080' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const replicas = Number(values.replicas);
  const port = Number(values.port);
  if (
    !Number.isInteger(replicas) ||
    replicas < 1 ||
    replicas > 16 ||
    !Number.isInteger(port) ||
    port < 0 ||
    port > 65535
  ) {
    throw new Error(`--replicas must be 1–16 and --port a port number\n\n${USAGE}`);
  }
  const config = new AppConfig(validateEnvironment(process.env));
  let embedded: LocalDatabase | undefined;
  if (!config.databaseUrl) embedded = await openEmbeddedPostgres(`${config.dataDir}/cluster`, { persistent: true });
  const cluster = await startLocalCluster({ replicas, port, databaseUrl: embedded?.url ?? config.databaseUrl! });
  process.stdout.write(
    [
      '',
      `Alcarta cluster: ${cluster.url} (nginx) → ${cluster.replicas.length} replicas`,
      ...cluster.replicas.map((r) => `  replica ${r.index}: ${r.url}  pid ${r.pid}`),
      `MCP endpoint: ${cluster.url}/mcp   metrics of a replica: <replica url>/metrics`,
      'A replica stopped with SIGTERM drains and is started again after 5 s. Ctrl-C stops everything.',
      '',
    ].join('\n') + '\n',
  );

  let stopping = false;
  const restarting = new Set<number>();
  const watch = setInterval(() => {
    for (const replica of cluster.replicas) {
      if (replica.running || stopping || restarting.has(replica.index)) continue;
      restarting.add(replica.index);
      setTimeout(() => {
        if (stopping) return;
        void replica
          .start()
          .then(() => process.stdout.write(`replica ${replica.index} restarted: pid ${replica.pid}\n`))
          .catch((err: Error) => process.stderr.write(`replica ${replica.index} did not restart: ${err.message}\n`))
          .finally(() => restarting.delete(replica.index));
      }, 5_000);
    }
  }, 1_000);
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    clearInterval(watch);
    await cluster.stop();
    await embedded?.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
}

main().catch((err: unknown) => {
  process.stderr.write(`cluster failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
