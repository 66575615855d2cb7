import { DynamicModule, Module } from '@nestjs/common';
import { Logger } from 'pino';
import { AuthModule } from '../auth/auth.module';
import { AlcartaConfigModule, ConfigOptions } from '../config/config.module';
import { DatabaseModule } from '../database/database.module';
import { LoggingModule } from '../logging/logging.module';
import { MailModule } from '../mail/mail.module';
import { MetricsCoreModule } from '../metrics/metrics-core.module';

/** What the administrative CLI needs: the database, tokens and mailboxes; no HTTP, no jobs. */
@Module({})
export class CliModule {
  static register(options: ConfigOptions, logger: Logger): DynamicModule {
    return {
      module: CliModule,
      imports: [
        AlcartaConfigModule.forRoot(options),
        LoggingModule.forRoot(logger),
        MetricsCoreModule,
        DatabaseModule.forRoot(),
        MailModule,
        AuthModule,
      ],
    };
  }
}
