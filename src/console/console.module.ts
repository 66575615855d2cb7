import { MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { ConsoleAssetsController } from './console-assets.controller';
import { ConsoleHeadersMiddleware } from './console-headers.middleware';
import { ConsoleViews } from './console-views';

/** The approver console (SPEC 11): server-rendered pages at /console for the people who decide. */
@Module({
  controllers: [ConsoleAssetsController],
  providers: [ConsoleViews],
  exports: [ConsoleViews],
})
export class ConsoleModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(ConsoleHeadersMiddleware).forRoutes('console', 'console/*path');
  }
}
