/**
 * The service tier's harness: the application's real Nest modules, TypeORM repositories and
 * migrations against a fresh database of its own on the DATABASE_URL server, without an HTTP
 * listener, the MCP transport or the SMTP listener. Tests call the core services' public methods
 * directly, so they state the rules those services keep, not how HTTP or MCP carries them.
 *
 * No background job runs unless a test starts it (`startDoorbells`, `startWaitEngine`,
 * `startOutboxWorker`): a sweeper or worker acting on its own would race the rule a test checks.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Type } from '@nestjs/common';
import { Test, TestingModule, TestingModuleBuilder } from '@nestjs/testing';
import { AppModule } from '#app/app.module.js';
import { Caller, OPERATOR } from '#app/kernel/caller.js';
import { Scope } from '#app/kernel/scopes.js';
import { AlcartaError } from '#app/kernel/errors.js';
import { TokenService } from '#app/auth/token.service.js';
import { MigrationRunner } from '#app/database/migration-runner.js';
import { DoorbellListener } from '#app/events/doorbell-listener.js';
import { DrainState } from '#app/lifecycle/drain-state.js';
import { createRootLogger, PinoNestLogger } from '#app/logging/logger.js';
import { MailboxService } from '#app/mail/mailbox.service.js';
import { InboundMessage } from '#app/mail/inbound-message.js';
import { OutboxWorker } from '#app/outbox/outbox.worker.js';
import { WaitEngine } from '#app/waits/wait-engine.js';
import { createTestDatabase, TestDatabase } from './database';
import { dnsZone } from './dns-zone';
import { recordSecret, recordSecretSettings, serverLogger } from './test-logs';

export interface ServiceTier {
  db: TestDatabase;
  module: TestingModule;
  /** A provider of the application, by class (a service, a repository). */
  get<T>(type: Type<T>): T;
  /** A new mailbox (created by the operator); returns its id. */
  mailbox(address?: string): Promise<string>;
  /** A new static token with these scopes on these mailbox ids (or `['*']`), as its Caller. */
  caller(scopes: Scope[], mailboxes: string[]): Promise<Caller>;
  /** Listens for doorbells (NOTIFY), as a server does at start-up: waits wake on commits. */
  startDoorbells(): Promise<void>;
  /** Starts the wait engine's lease (it then owns and watches persisted waits); needs doorbells. */
  startWaitEngine(): void;
  /** Starts this replica's outbox worker (it sends only when the relay is configured); needs doorbells. */
  startOutboxWorker(): void;
  /** Drains and closes the application, as a server stops; unless `keepDatabase`, drops the database. */
  close(options?: { keepDatabase?: boolean }): Promise<void>;
}

export interface ServiceTierOptions {
  /** Settings over the defaults below (as environment variables, like a server's). */
  env?: Record<string, string>;
  /** Share a database with another tier (a second replica); by default a fresh one. */
  db?: TestDatabase;
  /** Replace providers before the module is built (e.g. a relay that records instead of sending). */
  override?: (builder: TestingModuleBuilder) => TestingModuleBuilder;
}

let addressCounter = 0;

/** Builds the application context on a fresh (or the given) database and applies the migrations. */
export async function startServiceTier(options: ServiceTierOptions = {}): Promise<ServiceTier> {
  const db = options.db ?? (await createTestDatabase());
  const overrides = {
    DATABASE_URL: db.url,
    ALCARTA_LOG_LEVEL: 'warn',
    ALCARTA_DB_POOL_SIZE: '5',
    ALCARTA_SMTP_PORT: 'off',
    ...options.env,
  };
  recordSecretSettings(overrides);
  const logger = serverLogger(overrides.ALCARTA_LOG_LEVEL) ?? createRootLogger(overrides.ALCARTA_LOG_LEVEL);
  let builder = Test.createTestingModule({
    imports: [AppModule.register({ overrides, dnsResolver: dnsZone() }, logger)],
  }).setLogger(new PinoNestLogger(logger));
  if (options.override) builder = options.override(builder);
  const module = await builder.compile();
  try {
    // Before the lifecycle hooks, as a server does: a job that starts itself finds its tables.
    await module.get(MigrationRunner).run();
    await module.init();
  } catch (err) {
    await module.close().catch(() => undefined);
    if (!options.db) await db.drop();
    throw err;
  }

  const get = <T>(type: Type<T>): T => module.get(type, { strict: false });
  return {
    db,
    module,
    get,
    mailbox: async (address) => {
      const created = await get(MailboxService).create(
        OPERATOR,
        address ?? `svc-${process.pid}-${++addressCounter}-${randomBytes(3).toString('hex')}@example.com`,
        null,
      );
      return created.mailbox_id;
    },
    caller: async (scopes, mailboxes) => {
      const token = await get(TokenService).create(OPERATOR, {
        name: `service tier ${scopes.join(' ')}`,
        scopes,
        mailboxes,
        expiresAt: null,
      });
      recordSecret('token secret (service tier)', token.secret);
      return new Caller(token.token_id, new Set(scopes), mailboxes, { authenticatedAt: Date.now() });
    },
    startDoorbells: () => get(DoorbellListener).start(),
    startWaitEngine: () => get(WaitEngine).start(),
    startOutboxWorker: () => get(OutboxWorker).start(),
    close: async ({ keepDatabase = false } = {}) => {
      await get(DrainState).begin();
      await module.close();
      if (!keepDatabase) await db.drop();
    },
  };
}

/** An inbound message as SMTP or REST ingest would hand it over; fields not given are plain. */
export function inbound(fields: Partial<InboundMessage> = {}): InboundMessage {
  return {
    from: 'sender@example.org',
    to: ['agent@example.com'],
    cc: [],
    subject: 'Hello',
    text: 'Hello there.',
    html: null,
    messageIdHeader: null,
    inReplyTo: null,
    references: [],
    receivedAt: null,
    ...fields,
  };
}

/**
 * Asserts that `run` fails with the AlcartaError of this code and reason (what REST and MCP turn
 * into a status and an error result); returns the error for further checks.
 */
export async function refused(run: Promise<unknown>, code: string, reason: string): Promise<AlcartaError> {
  const err = await run.then(
    () => assert.fail(`expected ${code} ${reason}, but it succeeded`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AlcartaError, `expected an AlcartaError, got ${String(err)}`);
  assert.deepEqual([err.code, err.reason], [code, reason], err.message);
  return err;
}
