// @ts-check
/**
 * The rank of every directory of src/: the single source of the module graph's direction. A
 * directory may import only directories of a strictly lower rank (files of its own directory are
 * always fine); the top-level files (main.ts, server.ts, cli.ts, app.module.ts) outrank them all.
 * eslint.config.mjs turns this table into import rules, and test/unit/module-graph.test.ts checks
 * the whole graph against it (every directory ranked, every import pointing down, no cycle).
 *
 * A lower module that needs something from a higher one asks for it through a hook or registry it
 * owns (CredentialRevocationHooks, the wait resolution hooks, the Metrics registry, the background
 * job registry), so the dependency is inverted, not hidden. docs/architecture.md draws the graph.
 *
 * @type {Readonly<Record<string, number>>}
 */
export const SRC_RANKS = {
  // Shared identity and error types: the Caller and its mailbox access, scopes, route decorators,
  // the JSON-RPC error shape, bearer challenges, AlcartaError.
  kernel: 0,
  // Leaves of the platform.
  config: 1,
  logging: 1,
  common: 1,
  metrics: 1,
  // Process lifetime (drain, background jobs) and the connection to PostgreSQL.
  lifecycle: 2,
  database: 2,
  // Encryption of secrets at rest (the credentials of connected mailboxes) with the configured key.
  secrets: 2,
  // The event log and its doorbell; the HTTP plumbing every controller uses; the audit trail.
  events: 3,
  audit: 3,
  http: 3,
  // Readiness; mailboxes and messages.
  health: 4,
  mail: 4,
  // Tokens, principals, grants; outbound delivery of approved mail.
  auth: 5,
  outbox: 5,
  // Approval requests (approving queues an outbox delivery); SMTP ingestion; connected mailboxes
  // (IMAP accounts synced into mailboxes, sending through their own submission servers).
  approvals: 6,
  smtp: 6,
  'connected-mailboxes': 6,
  // Webhooks: endpoints, and the delivery of every event to them (the outbox's due-work loop).
  webhooks: 6,
  // The wait engine: waits on messages, requests and deliveries.
  waits: 7,
  // What is built on waits: durable tasks, websocket wait sockets, the approvers' console.
  tasks: 8,
  'wait-sockets': 8,
  console: 8,
  // Webhook delivery of the Events extension: subscriptions whose feeds (waits) go to webhooks.
  'event-subscriptions': 8,
  // Approval mail (its link pages use the console's layout) and the MCP endpoint.
  'approval-mail': 9,
  mcp: 9,
  // Every table's entity, handed to the database module by the applications; the OpenAPI document
  // of the REST routes, built from the running application's controllers.
  schema: 10,
  openapi: 10,
  // The operator's command line.
  cli: 11,
};

/** The files directly in src/: the applications, above every directory. */
export const TOP_LEVEL_FILES = ['main.ts', 'server.ts', 'cli.ts', 'app.module.ts'];
