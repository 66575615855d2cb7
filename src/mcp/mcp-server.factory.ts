import { Injectable } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import {
  CallToolRequestSchema,
  InitializeRequestSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { Caller } from '../auth/caller';
import { ProtocolRevision } from './protocol-revision';
import { ToolCatalog } from './tool-catalog';

const CAPABILITIES = { tools: { listChanged: false } };

/** The SDK would build a new Ajv instance (with all formats) for every server, i.e. every request. */
const SHARED_VALIDATOR = new AjvJsonSchemaValidator();

const SERVER_INFO = { name: 'alcarta', title: 'Alcarta', version: '0.1.0' };

const INSTRUCTIONS =
  'Alcarta gives you mailboxes and human approvals. Use list_mailboxes to find your mailboxes, ' +
  'list_messages/get_message to read mail, send_email to send (a person approves first) and request_approval ' +
  'to ask a person before acting. Never poll in a loop: wait for new mail or decisions with email_await, ' +
  'monitor_inbox or monitor_approval, and resume with the next_cursor you were given.';

/**
 * Builds the MCP server object for one HTTP request (the endpoint is stateless: any replica serves
 * any request). It is small on purpose: the handlers close over shared singletons, and the tool
 * listing is computed once by the catalog.
 */
@Injectable()
export class McpServerFactory {
  constructor(private readonly catalog: ToolCatalog) {}

  create(caller: Caller, revision: ProtocolRevision): Server {
    const server = new Server(SERVER_INFO, {
      capabilities: CAPABILITIES,
      instructions: INSTRUCTIONS,
      jsonSchemaValidator: SHARED_VALIDATOR,
    });
    // The SDK would echo any revision it knows (including ones Alcarta does not support); the
    // revision was negotiated before this server was built.
    server.setRequestHandler(InitializeRequestSchema, () => ({
      protocolVersion: revision,
      capabilities: CAPABILITIES,
      serverInfo: SERVER_INFO,
      instructions: INSTRUCTIONS,
    }));
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.catalog.list(caller) }));
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
      const progressToken = request.params._meta?.progressToken;
      return this.catalog.call(request.params.name, request.params.arguments, {
        caller,
        revision,
        signal: extra.signal,
        progress:
          progressToken === undefined
            ? undefined
            : (progress, message) =>
                extra.sendNotification({
                  method: 'notifications/progress',
                  params: { progressToken, progress, message },
                }),
      });
    });
    return server;
  }
}
