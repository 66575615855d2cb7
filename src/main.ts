import 'reflect-metadata';
import { Logger } from 'pino';
import { AppConfig } from './config/app-config';
import { validateEnvironment } from './config/environment';
import { openEmbeddedPostgres } from './database/embedded-postgres';
import { createRootLogger } from './logging/logger';
import { embeddedSecretsKeySettings } from './secrets/secrets-key-file';
import { RunningServer, startServer } from './server';

/**
 * `npm start` / `node dist/main.js`. Without DATABASE_URL the server brings its own PostgreSQL
 * (data under ALCARTA_DATA_DIR) and stops it on exit. SIGTERM and SIGINT close the server
 * gracefully and exit 0, or force the exit after ALCARTA_SHUTDOWN_GRACE_SECONDS.
 */
async function main(): Promise<void> {
  const config = new AppConfig(validateEnvironment(process.env));
  const log = createRootLogger(config.logLevel);
  const embedded = config.databaseUrl
    ? undefined
    : await openEmbeddedPostgres(config.dataDir, {
        persistent: true,
        onLog: (line) => log.debug({ component: 'postgres' }, line),
      });
  if (embedded) log.info({ data_dir: config.dataDir }, 'embedded PostgreSQL started');

  let server;
  try {
    server = await startServer({
      overrides: { DATABASE_URL: embedded?.url ?? config.databaseUrl, ...(await embeddedSecretsKeySettings(config)) },
      logger: log,
    });
  } catch (err) {
    await embedded?.close();
    throw err;
  }
  logWhereToReach(log, server);

  let stopping = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    setTimeout(() => {
      log.error({ grace_ms: config.shutdownGraceMs }, 'shutdown grace period exceeded; exiting');
      process.exit(1);
    }, config.shutdownGraceMs).unref();
    void (async () => {
      await server.close();
      await embedded?.close();
      log.info('stopped');
      process.exit(0);
    })();
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

/**
 * One line per way in, with the URLs a newcomer opens next: where HTTP (and so MCP) listens, where
 * SMTP does, and the console. The URLs are the public ones (ALCARTA_PUBLIC_URL, by default this
 * machine on the listening port).
 */
function logWhereToReach(log: Logger, server: RunningServer): void {
  const config = server.app.get(AppConfig);
  const port = Number(new URL(server.url).port);
  log.info(
    { http_url: config.publicUrl, mcp_url: `${config.publicUrl}/mcp`, host: config.host, port },
    `HTTP listening on ${config.host}:${port}; MCP endpoint ${config.publicUrl}/mcp`,
  );
  if (server.smtpPort === undefined) log.info({ smtp_url: null }, 'SMTP is off (ALCARTA_SMTP_PORT=off)');
  else {
    const smtpUrl = `smtp://${new URL(config.publicUrl).hostname}:${server.smtpPort}`;
    log.info(
      { smtp_url: smtpUrl, host: config.host, port: server.smtpPort },
      `SMTP listening on ${config.host}:${server.smtpPort} (${smtpUrl})`,
    );
  }
  log.info({ console_url: `${config.publicUrl}/console` }, `Console at ${config.publicUrl}/console`);
}

main().catch((err: unknown) => {
  process.stderr.write(`Alcarta failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
