import { MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { ApprovalsModule } from '../approvals/approvals.module';
import { MailModule } from '../mail/mail.module';
import { BlockingCallResponder } from './blocking-call.responder';
import { McpController } from './mcp.controller';
import { McpEndpoint } from './mcp-endpoint.service';
import { McpServerFactory } from './mcp-server.factory';
import { OriginCheckMiddleware } from './origin-check.middleware';
import { TaskRequestHandlers } from './task-request.handlers';
import { ToolCatalog } from './tool-catalog';
import { TasksModule } from '../tasks/tasks.module';
import { TOOL_PROVIDERS, ToolProvider } from './tool-definition';
import { ApprovalTools } from './tools/approval.tools';
import { MailTools } from './tools/mail.tools';
import { WaitTools } from './tools/wait.tools';
import { WaitsModule } from '../waits/waits.module';

@Module({
  imports: [MailModule, ApprovalsModule, WaitsModule, TasksModule],
  controllers: [McpController],
  providers: [
    MailTools,
    ApprovalTools,
    WaitTools,
    {
      provide: TOOL_PROVIDERS,
      inject: [MailTools, ApprovalTools, WaitTools],
      useFactory: (...providers: ToolProvider[]) => providers,
    },
    ToolCatalog,
    TaskRequestHandlers,
    McpServerFactory,
    BlockingCallResponder,
    McpEndpoint,
  ],
})
export class McpModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(OriginCheckMiddleware).forRoutes('mcp');
  }
}
