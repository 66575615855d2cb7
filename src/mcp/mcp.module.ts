import { Module } from '@nestjs/common';
import { ApprovalsModule } from '../approvals/approvals.module';
import { EventsModule } from '../events/events.module';
import { MailModule } from '../mail/mail.module';
import { BlockingCallResponder } from './blocking-call.responder';
import { CallCancellations } from './call-cancellations';
import { McpController } from './mcp.controller';
import { McpEndpoint } from './mcp-endpoint.service';
import { McpServerFactory } from './mcp-server.factory';
import { TaskRequestHandlers } from './task-request.handlers';
import { ToolCatalog } from './tool-catalog';
import { TasksModule } from '../tasks/tasks.module';
import { TOOL_PROVIDERS, ToolProvider } from './tool-definition';
import { ApprovalTools } from './tools/approval.tools';
import { MailTools } from './tools/mail.tools';
import { WaitTools } from './tools/wait.tools';
import { DeliveryModule } from '../delivery/delivery.module';
import { ModernMcpEndpoint } from './modern/modern-mcp.endpoint';
import { ModernServerFactory } from './modern/modern-server.factory';
import { MODERN_EXTENSIONS, ModernToolCalls } from './modern/modern-tool-calls';
import { ModernExtension } from './modern/modern-extension';
import { TasksExtension } from './modern/tasks-extension';
import { ModernRequestClassifier } from './modern/modern-request-classifier';
import { TaskSubscriptions } from './modern/task-subscriptions';
import { EventsExtension } from './modern/events-extension';
import { WaitsModule } from '../waits/waits.module';

/** The MCP endpoint. Its browser access (CORS, origin check) is `mcpBrowserAccess`, set up before body parsing. */
@Module({
  imports: [MailModule, ApprovalsModule, DeliveryModule, TasksModule, EventsModule, WaitsModule],
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
    CallCancellations,
    BlockingCallResponder,
    McpEndpoint,
    EventsExtension,
    {
      provide: MODERN_EXTENSIONS,
      inject: [TasksExtension, EventsExtension],
      useFactory: (...extensions: ModernExtension[]) => extensions,
    },
    TasksExtension,
    TaskSubscriptions,
    ModernRequestClassifier,
    ModernToolCalls,
    ModernServerFactory,
    ModernMcpEndpoint,
  ],
})
export class McpModule {}
