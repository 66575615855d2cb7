import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Logger } from 'pino';
import { AppModule } from './app.module';
import { BootstrapTokenService } from './auth/bootstrap-token.service';
import { AppConfig } from './config/app-config';
import { MigrationRunner } from './database/migration-runner';
import { WaitSocketAdapter } from './wait-sockets/wait-socket.adapter';
import { BackgroundJobs } from './lifecycle/background-job';
import { DrainState } from './lifecycle/drain-state';
import { bodyParsers } from './http/body-parsers';
import { AlcartaExpressAdapter, closeConnectionsWhileDraining, connectionLimits } from './http/http-server';
import { requestLogger } from './http/request-logger';
import { auditRequestContext } from './audit/audit-context';
import { requestMetrics } from './http/request-metrics';
import { InboundSmtpServer } from './smtp/inbound-smtp.server';
import { Metrics } from './metrics/metrics';
import { mcpBrowserAccess } from './mcp/browser-access';
import { createValidationPipe } from './http/validation';
import { validateEnvironment } from './config/environment';
import { DnsResolver } from './mail/dns-resolver';
import { createRootLogger, PinoNestLogger } from './logging/logger';
import { serveOpenApi } from './openapi/openapi-route';

export interface ServerOptions {
  /** Settings that win over the environment: the embedded database URL, test settings. */
  overrides?: Record<string, string | undefined>;
  /** Where logs go (JSON lines); by default standard output at ALCARTA_LOG_LEVEL. */
  logger?: Logger;
  /** The DNS lookups of sender authentication; by default Node's resolver (tests serve their own records). */
  dnsResolver?: DnsResolver;
}

export interface RunningServer {
  app: NestExpressApplication;
  /** The address actually bound (useful with PORT=0). */
  url: string;
  /** The SMTP port actually bound (useful with ALCARTA_SMTP_PORT=0); undefined when SMTP is off. */
  smtpPort: number | undefined;
  /** Graceful stop: readiness fails, blocked waits answer `shutdown`, then everything closes. */
  close(): Promise<void>;
}

/**
 * Start-up, in order: configuration, database, migrations (with ALCARTA_MIGRATIONS=off only a check
 * that they were applied), the bootstrap admin token, background jobs, then the HTTP listener and the
 * SMTP listener (which closes with the app, before the database: InboundSmtpServer).
 * `main.ts` and the end-to-end tests both start the server through here, so the tests exercise the
 * real start-up path.
 */
export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const config = new AppConfig(validateEnvironment({ ...process.env, ...options.overrides }));
  const logger = options.logger ?? createRootLogger(config.logLevel);
  const app = await NestFactory.create<NestExpressApplication>(
    AppModule.register(options, logger),
    new AlcartaExpressAdapter(connectionLimits(config)),
    { bodyParser: false, logger: new PinoNestLogger(logger) },
  );
  try {
    return await listen(app, logger);
  } catch (err) {
    await app.close().catch(() => undefined);
    throw err;
  }
}

async function listen(app: NestExpressApplication, logger: Logger): Promise<RunningServer> {
  const config = app.get(AppConfig);
  // Only the configured proxies' X-Forwarded-For counts: trusting any sender would let every client
  // name its own address and escape the per-address limits of console attempts.
  app.set('trust proxy', config.trustedProxies.length > 0 ? [...config.trustedProxies] : false);
  app.set('x-powered-by', false);
  const drain = app.get(DrainState);
  app.use(closeConnectionsWhileDraining(() => drain.isDraining));
  app.use(requestLogger(logger));
  app.use(requestMetrics(app.get(Metrics)));
  app.use(mcpBrowserAccess(config));
  app.use(bodyParsers(config));
  app.use(auditRequestContext);
  app.useGlobalPipes(createValidationPipe());

  if (config.runMigrations) await app.get(MigrationRunner).run();
  else await app.get(MigrationRunner).assertUpToDate();
  await app.get(BootstrapTokenService).ensureAdminToken();
  // The doorbell listener, then the wait engine, then the workers (lifecycle/background-job.ts).
  await app.get(BackgroundJobs).startAll();

  serveOpenApi(app);
  app.useWebSocketAdapter(new WaitSocketAdapter(app));
  await app.listen(config.port, config.host);
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  config.listeningOn(port);
  const smtpPort = await app.get(InboundSmtpServer).listen();
  return {
    app,
    url: `http://127.0.0.1:${port}`,
    smtpPort,
    close: async () => {
      // Draining first answers every blocked wait and open socket (shutdown: true), so the HTTP
      // server can close, and lets SMTP transactions in flight finish.
      await drain.begin();
      // Keep-alive connections with no request in flight would hold `server.close()` open.
      app.getHttpServer().closeIdleConnections();
      await app.close();
    },
  };
}
