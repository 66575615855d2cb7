import { MiddlewareConsumer, Module, NestModule, RequestMethod } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import express from 'express';
import { ApprovalsModule } from '../approvals/approvals.module';
import { AuthModule } from '../auth/auth.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { OutboxModule } from '../outbox/outbox.module';
import { WaitsModule } from '../waits/waits.module';
import { ConsoleAssetsController } from './console-assets.controller';
import { ConsoleAttemptLimits } from './console-attempt-limits';
import { ConsoleExceptionFilter } from './console-exception.filter';
import { ConsoleHeadersMiddleware } from './console-headers.middleware';
import { ConsoleOidcService } from './console-oidc.service';
import { ConsoleOutboxController, KeptMailPageGuard } from './console-outbox.controller';
import { ConsolePendingFeedService } from './console-pending-feed.service';
import { ConsoleRequestsController } from './console-requests.controller';
import { ConsoleRequestsService } from './console-requests.service';
import { ConsoleSessionEntity } from './console-session.entity';
import { ConsoleSessionGuard } from './console-session.guard';
import { ConsoleSessionHousekeeping } from './console-session.housekeeping';
import { ConsoleSessionRepository } from './console-session.repository';
import { ConsoleSessionService } from './console-session.service';
import { ConsoleSignInFormGuard } from './console-sign-in-form.guard';
import { ConsoleSignInController } from './console-sign-in.controller';
import { ConsoleViews } from './console-views';
import { ConsoleMetrics } from './console.metrics';

/** Forms post `application/x-www-form-urlencoded`; the application's own parsers read JSON only. */
const FORM_BODY_LIMIT = '32kb';

/** The approver console (docs/approvers.md): server-rendered pages at /console for the people who decide. */
@Module({
  imports: [
    TypeOrmModule.forFeature([ConsoleSessionEntity]),
    AuthModule,
    ApprovalsModule,
    MailModule,
    WaitsModule,
    EventsModule,
    OutboxModule,
  ],
  controllers: [ConsoleAssetsController, ConsoleSignInController, ConsoleRequestsController, ConsoleOutboxController],
  providers: [
    ConsoleViews,
    ConsoleSessionRepository,
    ConsoleSessionService,
    ConsoleOidcService,
    ConsoleSessionGuard,
    ConsoleSignInFormGuard,
    ConsoleRequestsService,
    ConsolePendingFeedService,
    ConsoleExceptionFilter,
    ConsoleMetrics,
    ConsoleSessionHousekeeping,
    ConsoleAttemptLimits,
    KeptMailPageGuard,
  ],
  exports: [ConsoleViews, ConsoleSessionHousekeeping],
})
export class ConsoleModule implements NestModule {
  constructor(private readonly attempts: ConsoleAttemptLimits) {}

  configure(consumer: MiddlewareConsumer): void {
    consumer
      .apply(ConsoleHeadersMiddleware, express.urlencoded({ extended: false, limit: FORM_BODY_LIMIT }))
      .forRoutes('console', 'console/*path');
    // The approval links' pages belong to approval-mail, but they are console pages all the same.
    consumer.apply(this.attempts.limit('link')).forRoutes({ path: 'console/links/:token', method: RequestMethod.ALL });
    consumer
      .apply(this.attempts.limit('sign_in'))
      .forRoutes(
        { path: 'console/sign-in', method: RequestMethod.POST },
        { path: 'console/sign-in/oidc', method: RequestMethod.GET },
        { path: 'console/sign-in/callback', method: RequestMethod.GET },
      );
  }
}
