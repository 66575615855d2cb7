import { Injectable } from '@nestjs/common';
import { MissingRequiredClientCapabilityError, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { Server } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { Caller } from '../../kernel/caller';
import { AppConfig } from '../../config/app-config';
import { clientFacingError } from '../../database/database-errors';
import { EventSubscriptionService } from '../../event-subscriptions/event-subscription.service';
import { SubscriptionRefusal } from '../../event-subscriptions/subscription-refusal';
import { EventFeedService, FeedPage, MAX_FEED_PAGE, PageOptions } from '../../waits/event-feed.service';
import { EVENT_TYPES, EventName, eventType } from '../../waits/event-feed-types';
import { protocolErrorOf } from '../../kernel/json-rpc';
import { clientCapabilities, declaresExtension, Revision20260728Extension } from './extension';

/**
 * The identifier of the MCP Events extension (SEP-3415; incubated by the Triggers & Events working
 * group in modelcontextprotocol/experimental-ext-triggers-events, whose design sketch this follows).
 */
export const EVENTS_EXTENSION_ID = 'io.modelcontextprotocol/events';

/**
 * The extension's error codes: `NotFound` (an event type this server does not offer to this caller,
 * or no such subscription), `Unsupported` (a delivery mode not offered) and `CallbackEndpointError`
 * (the callback URL did not confirm a subscription).
 */
const NOT_FOUND = -32011;
const UNSUPPORTED = -32014;
const CALLBACK_ENDPOINT_ERROR = -32015;

/** How soon a client that got everything should poll again (the extension's `nextPollMs`). */
const NEXT_POLL_MS = 5_000;

const listParams = z.looseObject({ cursor: z.string().optional() });
const pollParams = z.looseObject({
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()).optional(),
  cursor: z.string().nullable().optional(),
  maxAgeMs: z.number().int().min(0).optional(),
  maxEvents: z.number().int().min(1).optional(),
});
const subscribeParams = z.looseObject({
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()).optional(),
  delivery: z.looseObject({ mode: z.string().optional(), url: z.string(), secret: z.string() }),
  cursor: z.string().nullable().optional(),
  maxAgeMs: z.number().int().min(0).optional(),
  ttlMs: z.number().int().min(0).nullable().optional(),
});
const unsubscribeParams = z.looseObject({
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()).optional(),
  delivery: z.looseObject({ url: z.string() }),
});
const anyResult = z.looseObject({});

/**
 * The experimental Events extension at 2026-07-28 (docs/agents.md, "Events extension"): `events/list`
 * names the event types this caller may read, `events/poll` returns one page of one of them after a
 * cursor, and `events/subscribe` / `events/unsubscribe` manage webhook delivery of the same feeds
 * (EventSubscriptionService; offered when the server can keep secrets). Push (`events/stream`) is not
 * offered: it answers -32601. A client must declare the extension in its per-request capabilities.
 */
@Injectable()
export class EventsExtension implements Revision20260728Extension {
  readonly id = EVENTS_EXTENSION_ID;
  readonly settings = {};
  readonly enabled: boolean;

  constructor(
    private readonly feeds: EventFeedService,
    private readonly subscriptions: EventSubscriptionService,
    config: AppConfig,
  ) {
    this.enabled = config.eventsExtension;
  }

  register(server: Server, caller: Caller): void {
    server.setRequestHandler('events/list', { params: listParams, result: anyResult }, (params, ctx) => {
      requireDeclared(ctx.mcpReq.envelope);
      // Every event type fits on one page: a cursor is never issued, so none is valid.
      if (params.cursor !== undefined) throw invalidParams('events/list issues no cursor; call it without one.');
      return {
        events: (Object.keys(EVENT_TYPES) as EventName[])
          .filter((name) => EVENT_TYPES[name].readable(this.feeds, caller))
          .map((name) => describe(name, this.subscriptions.offered)),
      };
    });
    server.setRequestHandler('events/poll', { params: pollParams, result: anyResult }, async (params, ctx) => {
      requireDeclared(ctx.mcpReq.envelope);
      const type = eventType(params.name);
      // Like a tool the token's scopes do not allow: indistinguishable from one that does not exist.
      if (!type || !type.readable(this.feeds, caller)) {
        throw new ProtocolError(NOT_FOUND, `No event type ${JSON.stringify(params.name)}; see events/list.`, {
          kind: 'event',
          name: params.name,
        });
      }
      const args = type.arguments.safeParse(params.arguments ?? {});
      if (!args.success) throw invalidParams(`Invalid arguments for ${params.name}: ${z.prettifyError(args.error)}`);
      const page: PageOptions = {
        cursor: params.cursor ?? null,
        maxEvents: Math.min(params.maxEvents ?? MAX_FEED_PAGE, MAX_FEED_PAGE),
        maxAgeMs: params.maxAgeMs,
      };
      return shape(params.name, await answered(type.poll(this.feeds, caller, args.data, page)));
    });
    server.setRequestHandler(
      'events/subscribe',
      { params: subscribeParams, result: anyResult },
      async (params, ctx) => {
        requireDeclared(ctx.mcpReq.envelope);
        if (params.delivery.mode !== undefined && params.delivery.mode !== 'webhook') {
          throw new ProtocolError(
            UNSUPPORTED,
            `events/subscribe is for webhook delivery, not ${params.delivery.mode}.`,
            {
              feature: 'deliveryMode',
              value: params.delivery.mode,
            },
          );
        }
        const result = await refusalsAsErrors(
          this.subscriptions.subscribe(caller, {
            name: params.name,
            arguments: params.arguments ?? {},
            url: params.delivery.url,
            secret: params.delivery.secret,
            cursor: params.cursor ?? null,
            maxAgeMs: params.maxAgeMs,
            ttlMs: params.ttlMs,
          }),
        );
        return { ...result };
      },
    );
    server.setRequestHandler(
      'events/unsubscribe',
      { params: unsubscribeParams, result: anyResult },
      async (params, ctx) => {
        requireDeclared(ctx.mcpReq.envelope);
        await refusalsAsErrors(
          this.subscriptions.unsubscribe(caller, {
            name: params.name,
            arguments: params.arguments ?? {},
            url: params.delivery.url,
          }),
        );
        return {};
      },
    );
  }
}

function describe(name: EventName, webhooks: boolean) {
  const type = EVENT_TYPES[name];
  const { $schema: _dialect, ...inputSchema } = z.toJSONSchema(type.arguments, { io: 'input' });
  return {
    name,
    description: type.description,
    delivery: webhooks ? ['poll', 'webhook'] : ['poll'],
    inputSchema,
    payloadSchema: type.payloadSchema,
  };
}

const REFUSAL_CODES: Record<SubscriptionRefusal['kind'], number> = {
  invalid_params: ProtocolErrorCode.InvalidParams,
  not_found: NOT_FOUND,
  unsupported: UNSUPPORTED,
  callback_failed: CALLBACK_ENDPOINT_ERROR,
};

/** A refused subscription as the extension's error; an unreachable database as -32000 (answered). */
async function refusalsAsErrors<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof SubscriptionRefusal) throw new ProtocolError(REFUSAL_CODES[err.kind], err.message, err.data);
    const known = clientFacingError(err);
    if (known?.code === 'unavailable') {
      const { code, message, data } = protocolErrorOf(known);
      throw new ProtocolError(code, message, data);
    }
    throw err;
  }
}

/** The extension's `PollEventsResult`. */
function shape(name: string, page: FeedPage) {
  return {
    events: page.events.map((e) => ({ eventId: e.id, name, timestamp: e.timestamp, data: e.data })),
    cursor: page.cursor,
    truncated: page.truncated,
    hasMore: page.hasMore,
    nextPollMs: NEXT_POLL_MS,
  };
}

/** The extension is offered to clients that ask for it (SEP-2133: the other side may fall back). */
function requireDeclared(envelope: object | undefined): void {
  if (!declaresExtension(clientCapabilities(envelope), EVENTS_EXTENSION_ID)) {
    throw new MissingRequiredClientCapabilityError(
      { requiredCapabilities: { extensions: { [EVENTS_EXTENSION_ID]: {} } } },
      `Declare the ${EVENTS_EXTENSION_ID} extension in the request's client capabilities to use it.`,
    );
  }
}

/**
 * Errors a caller can fix (a bad cursor, an invisible mailbox) are -32602 with Alcarta's error body;
 * an unreachable database is -32000 with it (protocolErrorOf).
 */
async function answered(page: Promise<FeedPage>): Promise<FeedPage> {
  try {
    return await page;
  } catch (err) {
    const known = clientFacingError(err);
    if (known && ['invalid_request', 'not_found', 'limit_exceeded', 'unavailable'].includes(known.code)) {
      const { code, message, data } = protocolErrorOf(known);
      throw new ProtocolError(code, message, data);
    }
    throw err;
  }
}

function invalidParams(message: string, data?: Record<string, unknown>): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, message, data);
}
