import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { Environment } from './environment';
import { trustedProxyEntries } from './trusted-proxies';
import { webhookAllowedHostEntries } from './webhook-allowed-hosts';

/** The ALCARTA_SMTP_RELAY_URL that keeps outbound mail in the console instead of sending it. */
export const KEEP_IN_CONSOLE_RELAY = 'console:';

/** Typed, derived view of the validated environment that the rest of the application injects. */
export class AppConfig {
  readonly port: number;
  readonly host: string;
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly runMigrations: boolean;
  readonly bootstrapTokenSecret: string | undefined;
  /**
   * The base of absolute URLs handed to clients (websocket URLs, approval links, OAuth metadata).
   * Unset ALCARTA_PUBLIC_URL means this machine on the listening port: PORT until the server has
   * bound, then the port it bound (which differs with PORT=0).
   */
  get publicUrl(): string {
    return this.configuredPublicUrl ?? `http://localhost:${this.listeningPort}`;
  }
  private readonly configuredPublicUrl: string | undefined;
  private listeningPort: number;
  readonly allowedOrigins: readonly string[];
  readonly maxBodyBytes: number;
  readonly maxIngestBytes: number;
  readonly logLevel: string;
  readonly dbPoolSize: number;
  readonly dbWorkerPoolSize: number;
  readonly expirySweepMs: number;
  readonly shutdownGraceMs: number;
  readonly maxMessageWaitSeconds: number;
  readonly maxRequestWaitSeconds: number;
  readonly waitRecheckMs: number;
  readonly keepaliveMs: number;
  readonly websockets: boolean;
  /** The experimental Events extension at 2026-07-28 (docs/agents.md, "Protocol revisions"). */
  readonly eventsExtension: boolean;
  readonly wsConnectTtlMs: number;
  readonly waitRetentionMs: number;
  readonly housekeepingMs: number;
  readonly eventRetentionMs: number;
  readonly auditRetentionMs: number;
  readonly taskMaxTtlMs: number;
  readonly maxActiveTasksPerToken: number;
  readonly taskPollIntervalMs: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly unreadResponseTimeoutMs: number;
  readonly listenBacklog: number;
  /** 0: no rate limit. */
  readonly rateLimitPerSecond: number;
  /** Failed approval-link and console sign-in attempts per client address and minute; 0: no limit. */
  readonly consoleAttemptsPerMinute: number;
  /** Proxies whose X-Forwarded-For names the client (Express `trust proxy`); empty: none. */
  readonly trustedProxies: readonly string[];
  /** Webhook targets allowed although private (host names or addresses); empty: public ones only. */
  readonly webhookAllowedHosts: readonly string[];
  /** Undefined: no SMTP listener. */
  readonly smtpPort: number | undefined;
  readonly smtpHostname: string;
  readonly smtpTls: { certFile: string; keyFile: string } | undefined;
  readonly smtpAuthRequired: boolean;
  readonly smtpMaxClients: number;
  readonly smtpMaxBytesInFlight: number;
  readonly mailAuthentication: boolean;
  /** Undefined: approved mail is recorded with delivery status `not_configured`. */
  readonly smtpRelayUrl: string | undefined;
  /** ALCARTA_SMTP_RELAY_URL=console: (local development): outbound mail is kept in the console, never sent. */
  readonly keepsOutboundMail: boolean;
  readonly dkim: { selector: string; privateKeyFile: string } | undefined;
  readonly smtpRetryMaxMs: number;
  readonly smtpRetryBaseMs: number;
  readonly webhookRetryMaxMs: number;
  readonly webhookRetryBaseMs: number;
  readonly webhookLeaseMs: number;
  readonly webhookConcurrency: number;
  readonly outboxLeaseMs: number;
  /** The key of the secrets of connected mailboxes; undefined: none configured (the embedded database makes one). */
  get secretsKey(): Buffer | undefined {
    return this.#secretsKey;
  }
  /** The key before a rotation: what it sealed is still opened. */
  get previousSecretsKey(): Buffer | undefined {
    return this.#previousSecretsKey;
  }
  // Private fields behind getters: util.inspect and JSON.stringify of the config never show the keys.
  readonly #secretsKey: Buffer | undefined;
  readonly #previousSecretsKey: Buffer | undefined;
  readonly imapLeaseMs: number;
  readonly imapIdleMs: number;
  readonly imapRetryMaxMs: number;
  readonly imapConnectTimeoutMs: number;
  readonly imapMaxFolders: number;
  /** OpenID Connect sign-in to the console (docs/approvers.md); undefined: people paste a token. */
  readonly consoleOidc: { clientId: string; clientSecret: string | undefined } | undefined;
  /** Scopes every console session has besides those of its token. */
  readonly consoleDefaultScopes: readonly string[];
  /** Undefined: only static `alc_` tokens (no identity provider; docs/operators.md, "Identity providers"). */
  readonly oauth:
    | {
        issuer: string;
        jwksUrl: string | undefined;
        audiences: readonly string[];
        scopePrefix: string;
        allowAdmin: boolean;
        groupsClaim: string;
        /** How long a failed fetch from the issuer is remembered. */
        failureBackoffMs: number;
        /** The furthest a token's `exp` may lie ahead of now. */
        maxTokenLifetimeSeconds: number;
      }
    | undefined;

  constructor(env: Environment) {
    this.port = env.PORT;
    this.host = env.ALCARTA_HOST;
    this.databaseUrl = env.DATABASE_URL;
    this.dataDir = resolve(env.ALCARTA_DATA_DIR);
    this.runMigrations = env.ALCARTA_MIGRATIONS === 'on';
    this.bootstrapTokenSecret = env.ALCARTA_BOOTSTRAP_TOKEN;
    this.configuredPublicUrl = env.ALCARTA_PUBLIC_URL?.replace(/\/+$/, '');
    this.listeningPort = env.PORT;
    this.allowedOrigins = env.ALCARTA_ALLOWED_ORIGINS.split(',')
      .map((o) => o.trim().replace(/\/+$/, ''))
      .filter((o) => o.length > 0);
    this.maxBodyBytes = env.ALCARTA_MAX_BODY_BYTES;
    this.maxIngestBytes = env.ALCARTA_MAX_INGEST_BYTES;
    this.logLevel = env.ALCARTA_LOG_LEVEL;
    this.dbPoolSize = env.ALCARTA_DB_POOL_SIZE;
    this.dbWorkerPoolSize = env.ALCARTA_DB_WORKER_POOL_SIZE;
    this.expirySweepMs = env.ALCARTA_EXPIRY_SWEEP_SECONDS * 1000;
    this.shutdownGraceMs = env.ALCARTA_SHUTDOWN_GRACE_SECONDS * 1000;
    this.maxMessageWaitSeconds = env.ALCARTA_MAX_MESSAGE_WAIT_SECONDS;
    this.maxRequestWaitSeconds = env.ALCARTA_MAX_REQUEST_WAIT_SECONDS;
    this.waitRecheckMs = env.ALCARTA_WAIT_RECHECK_SECONDS * 1000;
    this.keepaliveMs = env.ALCARTA_KEEPALIVE_SECONDS * 1000;
    this.websockets = env.ALCARTA_WEBSOCKETS === 'on';
    this.eventsExtension = env.ALCARTA_EVENTS_EXTENSION === 'on';
    this.wsConnectTtlMs = env.ALCARTA_WS_CONNECT_TTL_SECONDS * 1000;
    this.waitRetentionMs = env.ALCARTA_WAIT_RETENTION_SECONDS * 1000;
    this.housekeepingMs = env.ALCARTA_HOUSEKEEPING_SECONDS * 1000;
    this.eventRetentionMs = env.ALCARTA_EVENT_RETENTION_DAYS * 24 * 3600 * 1000;
    this.auditRetentionMs = env.ALCARTA_AUDIT_RETENTION_DAYS * 24 * 3600 * 1000;
    this.taskMaxTtlMs = env.ALCARTA_TASK_MAX_TTL_SECONDS * 1000;
    this.maxActiveTasksPerToken = env.ALCARTA_MAX_ACTIVE_TASKS_PER_TOKEN;
    this.taskPollIntervalMs = env.ALCARTA_TASK_POLL_INTERVAL_SECONDS * 1000;
    this.headersTimeoutMs = env.ALCARTA_HEADERS_TIMEOUT_SECONDS * 1000;
    // Node requires the whole-request limit to be at least the headers limit.
    this.requestTimeoutMs = Math.max(env.ALCARTA_BODY_TIMEOUT_SECONDS, env.ALCARTA_HEADERS_TIMEOUT_SECONDS) * 1000;
    this.unreadResponseTimeoutMs = env.ALCARTA_UNREAD_RESPONSE_TIMEOUT_SECONDS * 1000;
    this.listenBacklog = env.ALCARTA_LISTEN_BACKLOG;
    this.rateLimitPerSecond = env.ALCARTA_RATE_LIMIT_PER_SECOND;
    this.consoleAttemptsPerMinute = env.ALCARTA_CONSOLE_ATTEMPTS_PER_MINUTE;
    this.trustedProxies = trustedProxyEntries(env.ALCARTA_TRUSTED_PROXIES);
    this.webhookAllowedHosts = webhookAllowedHostEntries(env.ALCARTA_WEBHOOK_ALLOWED_HOSTS);
    this.smtpPort = env.ALCARTA_SMTP_PORT === 'off' ? undefined : Number(env.ALCARTA_SMTP_PORT);
    this.smtpHostname = env.ALCARTA_SMTP_HOSTNAME ?? hostname();
    this.smtpTls =
      env.ALCARTA_SMTP_TLS_CERT_FILE && env.ALCARTA_SMTP_TLS_KEY_FILE
        ? { certFile: env.ALCARTA_SMTP_TLS_CERT_FILE, keyFile: env.ALCARTA_SMTP_TLS_KEY_FILE }
        : undefined;
    this.smtpAuthRequired = env.ALCARTA_SMTP_AUTH === 'required';
    this.smtpMaxClients = env.ALCARTA_SMTP_MAX_CLIENTS;
    this.smtpMaxBytesInFlight = env.ALCARTA_SMTP_MAX_BYTES_IN_FLIGHT;
    this.mailAuthentication = env.ALCARTA_MAIL_AUTH === 'on';
    this.smtpRelayUrl = env.ALCARTA_SMTP_RELAY_URL;
    this.keepsOutboundMail = env.ALCARTA_SMTP_RELAY_URL === KEEP_IN_CONSOLE_RELAY;
    this.dkim =
      env.ALCARTA_DKIM_SELECTOR && env.ALCARTA_DKIM_PRIVATE_KEY_FILE
        ? { selector: env.ALCARTA_DKIM_SELECTOR, privateKeyFile: env.ALCARTA_DKIM_PRIVATE_KEY_FILE }
        : undefined;
    this.smtpRetryMaxMs = env.ALCARTA_SMTP_RETRY_MAX_SECONDS * 1000;
    this.smtpRetryBaseMs = env.ALCARTA_SMTP_RETRY_BASE_SECONDS * 1000;
    this.webhookRetryMaxMs = env.ALCARTA_WEBHOOK_RETRY_MAX_SECONDS * 1000;
    this.webhookRetryBaseMs = env.ALCARTA_WEBHOOK_RETRY_BASE_SECONDS * 1000;
    this.webhookLeaseMs = env.ALCARTA_WEBHOOK_LEASE_SECONDS * 1000;
    this.webhookConcurrency = env.ALCARTA_WEBHOOK_CONCURRENCY;
    this.outboxLeaseMs = env.ALCARTA_OUTBOX_LEASE_SECONDS * 1000;
    this.#secretsKey = env.ALCARTA_SECRETS_KEY ? Buffer.from(env.ALCARTA_SECRETS_KEY.trim(), 'base64') : undefined;
    this.#previousSecretsKey = env.ALCARTA_SECRETS_KEY_PREVIOUS
      ? Buffer.from(env.ALCARTA_SECRETS_KEY_PREVIOUS.trim(), 'base64')
      : undefined;
    this.imapLeaseMs = env.ALCARTA_IMAP_LEASE_SECONDS * 1000;
    this.imapIdleMs = env.ALCARTA_IMAP_IDLE_SECONDS * 1000;
    this.imapRetryMaxMs = env.ALCARTA_IMAP_RETRY_MAX_SECONDS * 1000;
    this.imapConnectTimeoutMs = env.ALCARTA_IMAP_CONNECT_TIMEOUT_SECONDS * 1000;
    this.imapMaxFolders = env.ALCARTA_IMAP_MAX_FOLDERS;
    const audiences = env.ALCARTA_OAUTH_AUDIENCE.split(',')
      .map((a) => a.trim())
      .filter((a) => a.length > 0);
    // A getter: the default audience follows the public URL, which may take the bound port later.
    const publicUrlOf = () => this.publicUrl;
    this.oauth = env.ALCARTA_OAUTH_ISSUER
      ? {
          issuer: env.ALCARTA_OAUTH_ISSUER,
          jwksUrl: env.ALCARTA_OAUTH_JWKS_URL,
          get audiences() {
            return audiences.length > 0 ? audiences : [`${publicUrlOf()}/mcp`];
          },
          scopePrefix: env.ALCARTA_OAUTH_SCOPE_PREFIX,
          allowAdmin: env.ALCARTA_OAUTH_ALLOW_ADMIN === 'true',
          groupsClaim: env.ALCARTA_OAUTH_GROUPS_CLAIM,
          failureBackoffMs: env.ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS * 1000,
          maxTokenLifetimeSeconds: env.ALCARTA_OAUTH_MAX_TOKEN_LIFETIME_SECONDS,
        }
      : undefined;
    this.consoleOidc =
      this.oauth && env.ALCARTA_CONSOLE_CLIENT_ID
        ? { clientId: env.ALCARTA_CONSOLE_CLIENT_ID, clientSecret: env.ALCARTA_CONSOLE_CLIENT_SECRET }
        : undefined;
    this.consoleDefaultScopes = env.ALCARTA_CONSOLE_DEFAULT_SCOPES.split(' ').filter((s) => s.length > 0);
  }

  /** The port the HTTP server bound; the public URL's port when ALCARTA_PUBLIC_URL is unset. */
  listeningOn(port: number): void {
    this.listeningPort = port;
  }
}
