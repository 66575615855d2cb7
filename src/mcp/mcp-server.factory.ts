import { Injectable } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import {
  CallToolRequestSchema,
  InitializeRequestSchema,
  ListToolsRequestSchema,
  ServerCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import { Caller } from '../kernel/caller';
import { progressNotifier } from './progress';
import { SERVER_INFO, SERVER_INSTRUCTIONS } from './server-identity';
import { ProtocolRevision, TASKS_REVISION } from './protocol-revision';
import { TaskRequestHandlers } from './task-request.handlers';
import { ToolCatalog } from './tool-catalog';

const CAPABILITIES: ServerCapabilities = { tools: { listChanged: false } };

/** Declared at 2025-11-25 only: older revisions have no tasks (docs/agents.md, "Tasks"). */
const CAPABILITIES_WITH_TASKS: ServerCapabilities = {
  ...CAPABILITIES,
  tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
};

/** The SDK would build a new Ajv instance (with all formats) for every server, i.e. every request. */
const SHARED_VALIDATOR = new AjvJsonSchemaValidator();

/**
 * Builds the MCP server object for one HTTP request (the endpoint is stateless: any replica serves
 * any request). It is small on purpose: the handlers close over shared singletons, and the tool
 * listing is computed once by the catalog. The SDK declares the same capabilities at every revision
 * and refuses new ones after connecting, so the capabilities are chosen here, per revision.
 */
@Injectable()
export class McpServerFactory {
  constructor(
    private readonly catalog: ToolCatalog,
    private readonly taskHandlers: TaskRequestHandlers,
  ) {}

  create(caller: Caller, revision: ProtocolRevision): Server {
    const capabilities = revision === TASKS_REVISION ? CAPABILITIES_WITH_TASKS : CAPABILITIES;
    const server = new Server(SERVER_INFO, {
      capabilities,
      instructions: SERVER_INSTRUCTIONS,
      jsonSchemaValidator: SHARED_VALIDATOR,
    });
    // The SDK would echo any revision it knows (including ones Alcarta does not support); the
    // revision was negotiated before this server was built.
    server.setRequestHandler(InitializeRequestSchema, () => ({
      protocolVersion: revision,
      capabilities,
      serverInfo: SERVER_INFO,
      instructions: SERVER_INSTRUCTIONS,
    }));
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.catalog.list(caller, revision) }));
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
      const ctx = {
        caller,
        revision,
        signal: extra.signal,
        progress: progressNotifier(request.params._meta?.progressToken, (notification) =>
          extra.sendNotification(notification),
        ),
      };
      // `params.task` only reaches here at 2025-11-25: the endpoint drops it at older revisions.
      if (request.params.task)
        return this.catalog.callAsTask(request.params.name, request.params.arguments, ctx, request.params.task.ttl);
      return this.catalog.call(request.params.name, request.params.arguments, ctx);
    });
    if (revision === TASKS_REVISION) this.taskHandlers.register(server, caller);
    return server;
  }
}
