import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ApprovalMailModule } from './approval-mail/approval-mail.module';
import { ApprovalsModule } from './approvals/approvals.module';
import { AuditModule } from './audit/audit.module';
import { AuthModule } from './auth/auth.module';
import { AlcartaConfigModule, ConfigOptions } from './config/config.module';
import { ConnectedMailboxesModule } from './connected-mailboxes/connected-mailboxes.module';
import { ConsoleModule } from './console/console.module';
import { Logger } from 'pino';
import { ENTITIES } from './schema/entities';
import { DatabaseModule } from './database/database.module';
import { WaitSocketsModule } from './wait-sockets/wait-sockets.module';
import { EventsModule } from './events/events.module';
import { HealthModule } from './health/health.module';
import { RestExceptionFilter } from './http/rest-exception.filter';
import { LoggingModule } from './logging/logging.module';
import { DnsModule, DnsResolver } from './mail/dns-resolver';
import { MailModule } from './mail/mail.module';
import { LifecycleModule } from './lifecycle/lifecycle.module';
import { OutboxModule } from './outbox/outbox.module';
import { SmtpModule } from './smtp/smtp.module';
import { McpModule } from './mcp/mcp.module';
import { MetricsCoreModule } from './metrics/metrics-core.module';
import { MetricsModule } from './metrics/metrics.module';
import { WaitsModule } from './waits/waits.module';
import { EventSubscriptionsModule } from './event-subscriptions/event-subscriptions.module';
import { WebhooksModule } from './webhooks/webhooks.module';

/** The HTTP server (REST API, MCP endpoint, health) and the inbound SMTP server. */
@Module({})
export class AppModule {
  static register(options: ConfigOptions & { dnsResolver?: DnsResolver }, logger: Logger): DynamicModule {
    return {
      module: AppModule,
      imports: [
        AlcartaConfigModule.forRoot(options),
        LoggingModule.forRoot(logger),
        DnsModule.forRoot(options.dnsResolver),
        LifecycleModule,
        MetricsCoreModule,
        DatabaseModule.forRoot(ENTITIES),
        EventsModule,
        AuditModule,
        MailModule,
        OutboxModule,
        ConnectedMailboxesModule,
        WebhooksModule,
        SmtpModule,
        ApprovalsModule,
        AuthModule,
        WaitsModule,
        EventSubscriptionsModule,
        McpModule,
        WaitSocketsModule,
        ConsoleModule,
        ApprovalMailModule,
        HealthModule,
        MetricsModule,
      ],
      providers: [{ provide: APP_FILTER, useClass: RestExceptionFilter }],
    };
  }
}
