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
import { WaitSocketsModule } from '../wait-sockets/wait-sockets.module';
import { Revision20260728Endpoint } from './revision-2026-07-28/endpoint';
import { Revision20260728ServerFactory } from './revision-2026-07-28/server.factory';
import { REVISION_2026_07_28_EXTENSIONS, Revision20260728ToolCalls } from './revision-2026-07-28/tool-calls';
import { Revision20260728Extension } from './revision-2026-07-28/extension';
import { TasksExtension } from './revision-2026-07-28/tasks-extension';
import { Revision20260728RequestClassifier } from './revision-2026-07-28/request-classifier';
import { TaskSubscriptions } from './revision-2026-07-28/task-subscriptions';
import { EventsExtension } from './revision-2026-07-28/events-extension';
import { WaitsModule } from '../waits/waits.module';
import { EventSubscriptionsModule } from '../event-subscriptions/event-subscriptions.module';

/** The MCP endpoint. Its browser access (CORS, origin check) is `mcpBrowserAccess`, set up before body parsing. */
@Module({
  imports: [
    MailModule,
    ApprovalsModule,
    WaitSocketsModule,
    TasksModule,
    EventsModule,
    WaitsModule,
    EventSubscriptionsModule,
  ],
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
      provide: REVISION_2026_07_28_EXTENSIONS,
      inject: [TasksExtension, EventsExtension],
      useFactory: (...extensions: Revision20260728Extension[]) => extensions,
    },
    TasksExtension,
    TaskSubscriptions,
    Revision20260728RequestClassifier,
    Revision20260728ToolCalls,
    Revision20260728ServerFactory,
    Revision20260728Endpoint,
  ],
})
export class McpModule {}
