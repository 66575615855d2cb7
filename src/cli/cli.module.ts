import { DynamicModule, Module } from '@nestjs/common';
import { Logger } from 'pino';
import { AuditModule } from '../audit/audit.module';
import { AuthModule } from '../auth/auth.module';
import { AlcartaConfigModule, ConfigOptions } from '../config/config.module';
import { ENTITIES } from '../schema/entities';
import { DatabaseModule } from '../database/database.module';
import { LifecycleModule } from '../lifecycle/lifecycle.module';
import { LoggingModule } from '../logging/logging.module';
import { DnsModule } from '../mail/dns-resolver';
import { ConnectedMailboxesModule } from '../connected-mailboxes/connected-mailboxes.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { MailModule } from '../mail/mail.module';
import { MetricsCoreModule } from '../metrics/metrics-core.module';
import { TasksModule } from '../tasks/tasks.module';
import { MailboxPoliciesModule } from '../approvals/mailbox-policies.module';

/**
 * What the administrative CLI needs: the database, tokens and mailboxes; no HTTP, no jobs. Waits
 * and tasks are here for their revocation hooks: `tokens revoke` ends them as the REST API does.
 */
@Module({})
export class CliModule {
  static register(options: ConfigOptions, logger: Logger): DynamicModule {
    return {
      module: CliModule,
      imports: [
        AlcartaConfigModule.forRoot(options),
        LoggingModule.forRoot(logger),
        // The mail module's sender authentication needs a resolver; the CLI never looks anything up.
        DnsModule.forRoot(),
        MetricsCoreModule,
        DatabaseModule.forRoot(ENTITIES),
        LifecycleModule,
        AuditModule,
        MailModule,
        ConnectedMailboxesModule,
        // Events the CLI writes (a connected account changed) queue their webhook deliveries too.
        WebhooksModule,
        AuthModule,
        TasksModule,
        MailboxPoliciesModule,
      ],
    };
  }
}
