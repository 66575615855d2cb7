import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { CliModule } from './cli/cli.module';
import { describeFailure, needsSchema, runCommand, UsageError, USAGE } from './cli/commands';
import { AppConfig } from './config/app-config';
import { validateEnvironment } from './config/environment';
import { MigrationRunner } from './database/migration-runner';
import { LocalDatabase, openEmbeddedPostgres } from './database/embedded-postgres';
import { createRootLogger, PinoNestLogger } from './logging/logger';

/**
 * `npm run cli -- <command>` / `node dist/cli.js <command>`: administration without HTTP. Uses the
 * same database as the server (DATABASE_URL, or the embedded cluster under ALCARTA_DATA_DIR, which
 * it attaches to when the server is running). Logs go to standard error, results to standard output.
 */
async function main(argv: string[]): Promise<number> {
  if (argv.length === 0) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (argv[0] === 'help' || argv.includes('--help')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const config = new AppConfig(validateEnvironment(process.env));
  const logger = createRootLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, process.stderr);
  let embedded: LocalDatabase | undefined;
  try {
    embedded = config.databaseUrl ? undefined : await openEmbeddedPostgres(config.dataDir, { persistent: true });
    const app = await NestFactory.createApplicationContext(
      CliModule.register({ overrides: { DATABASE_URL: embedded?.url ?? config.databaseUrl } }, logger),
      { logger: new PinoNestLogger(logger) },
    );
    try {
      if (needsSchema(argv)) {
        if (config.runMigrations) await app.get(MigrationRunner).run();
        else await app.get(MigrationRunner).assertUpToDate();
      }
      const output = await runCommand(app, argv);
      process.stdout.write(`${argv.includes('--json') ? JSON.stringify(output.json, null, 2) : output.text}\n`);
      return 0;
    } finally {
      await app.close();
    }
  } catch (err) {
    process.stderr.write(`error: ${describeFailure(err)}\n`);
    if (err instanceof UsageError) process.stderr.write(`\n${USAGE}\n`);
    return err instanceof UsageError ? 2 : 1;
  } finally {
    await embedded?.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`error: ${describeFailure(err)}\n`);
    process.exit(1);
  },
);
