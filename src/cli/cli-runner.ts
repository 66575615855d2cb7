import { NestFactory } from '@nestjs/core';
import { AppConfig } from '../config/app-config';
import { validateEnvironment } from '../config/environment';
import { LocalDatabase, openEmbeddedPostgres } from '../database/embedded-postgres';
import { MigrationRunner } from '../database/migration-runner';
import { createRootLogger, PinoNestLogger } from '../logging/logger';
import { embeddedSecretsKeySettings } from '../secrets/secrets-key-file';
import { CliModule } from './cli.module';
import { WriteCommand } from './command-line';
import { describeFailure, runCommand } from './commands';
import { validateInput } from './input-validation';
import { printOutput } from './output';

/**
 * Runs one parsed command that changes something against the database: the server's (DATABASE_URL)
 * or the embedded cluster under ALCARTA_DATA_DIR, after checking its input as REST would and
 * applying pending migrations (ALCARTA_MIGRATIONS=on). Results go to standard output, logs and
 * errors to standard error.
 */
export async function execute(command: WriteCommand): Promise<number> {
  let embedded: LocalDatabase | undefined;
  try {
    await validateInput(command);
    const config = new AppConfig(validateEnvironment(process.env));
    const logger = createRootLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, process.stderr);
    embedded = config.databaseUrl ? undefined : await openEmbeddedPostgres(config.dataDir, { persistent: true });
    const app = await NestFactory.createApplicationContext(
      CliModule.register(
        {
          overrides: {
            DATABASE_URL: embedded?.url ?? config.databaseUrl,
            ...(await embeddedSecretsKeySettings(config)),
          },
        },
        logger,
      ),
      { logger: new PinoNestLogger(logger) },
    );
    try {
      if (command.name !== 'migrate') {
        if (config.runMigrations) await app.get(MigrationRunner).run();
        else await app.get(MigrationRunner).assertUpToDate();
      }
      const output = await runCommand(app, command);
      printOutput(command, output);
      return output.failed ? 1 : 0;
    } finally {
      await app.close();
    }
  } catch (err) {
    process.stderr.write(`error: ${describeFailure(err)}\n`);
    return 1;
  } finally {
    await embedded?.close();
  }
}
