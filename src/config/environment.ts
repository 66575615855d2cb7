import { plainToInstance, Transform, Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, IsUrl, Matches, Max, Min, ValidateBy, validateSync } from 'class-validator';
import { isTrustedProxyEntry, trustedProxyEntries } from './trusted-proxies';
import { isWebhookAllowedHostEntry, webhookAllowedHostEntries } from './webhook-allowed-hosts';

const emptyToUndefined = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && value.trim() === '' ? undefined : value;

/**
 * Every setting of the server, read from the environment (and `.env` when present); a bad value
 * stops the process at start with a message naming the variable, instead of surfacing later as a
 * confusing failure. docs/reference/settings.md is generated from this class (each property's doc
 * comment is its meaning there), and a test checks `.env.example` and the Helm chart against it.
 */
export class Environment {
  /** The HTTP port (MCP endpoint, REST API, console, health, metrics). */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(65535)
  PORT: number = 3000;

  /** The address the HTTP and SMTP listeners bind. */
  @IsString()
  ALCARTA_HOST: string = '0.0.0.0';

  /**
   * The PostgreSQL (15 or newer) to use, e.g. postgres://user:pass@host:5432/alcarta. Unset: the server
   * runs an embedded PostgreSQL with its data under ALCARTA_DATA_DIR.
   */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(/^postgres(ql)?:\/\//, { message: 'DATABASE_URL must be a postgres:// or postgresql:// URL' })
  DATABASE_URL?: string;

  /** Where the embedded PostgreSQL keeps its data (only without DATABASE_URL). */
  @IsString()
  ALCARTA_DATA_DIR: string = './.alcarta';

  /** Apply pending migrations at start; with `off`, run `npm run cli -- migrate` yourself (start checks they were). */
  @IsIn(['on', 'off'])
  ALCARTA_MIGRATIONS: 'on' | 'off' = 'on';

  /**
   * On a database without tokens, the secret of the admin token created at start; unset, one is
   * generated and printed once on standard error.
   */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(/^alc_[0-9A-Za-z]{43,}$/, {
    message: 'ALCARTA_BOOTSTRAP_TOKEN must be "alc_" followed by at least 43 base62 characters',
  })
  ALCARTA_BOOTSTRAP_TOKEN?: string;

  /**
   * The externally visible base URL: websocket URLs, approval links and OAuth metadata are built
   * from it. Unset: `http://localhost:<the port the server listens on>` (AppConfig).
   */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  ALCARTA_PUBLIC_URL?: string;

  /**
   * Browser origins allowed to call /mcp besides loopback ones, comma-separated. Requests without an
   * Origin header are allowed.
   */
  @IsString()
  ALCARTA_ALLOWED_ORIGINS: string = '';

  /** Largest request body of /mcp and the JSON APIs, in bytes. */
  @Type(() => Number)
  @IsInt()
  @Min(1024)
  ALCARTA_MAX_BODY_BYTES: number = 1024 * 1024;

  /** Largest inbound message (REST ingest or SMTP), in bytes. */
  @Type(() => Number)
  @IsInt()
  @Min(1024)
  ALCARTA_MAX_INGEST_BYTES: number = 25 * 1024 * 1024;

  /** Log level; logs are JSON lines on standard output. */
  @IsIn(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  ALCARTA_LOG_LEVEL: string = 'info';

  /** Connections in the database pool of each replica. */
  @Type(() => Number)
  @IsInt()
  @Min(2)
  @Max(1000)
  ALCARTA_DB_POOL_SIZE: number = 10;

  /**
   * Connections of each replica kept apart for the webhook worker's claims and records, beside
   * ALCARTA_DB_POOL_SIZE, so that a burst of requests queued for the main pool does not hold up
   * delivery. Opened when the worker first claims.
   */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(100)
  ALCARTA_DB_WORKER_POOL_SIZE: number = 2;

  /** How often overdue pending approval requests are moved to `expired`, and due ones escalated. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  ALCARTA_EXPIRY_SWEEP_SECONDS: number = 5;

  /** After SIGTERM or SIGINT, the process exits at the latest after this many seconds of draining. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  ALCARTA_SHUTDOWN_GRACE_SECONDS: number = 10;

  /** Longest `timeout_seconds` a message wait may ask for; larger values are refused. */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  ALCARTA_MAX_MESSAGE_WAIT_SECONDS: number = 300;

  /** Longest `timeout_seconds` a request wait may ask for; larger values are refused. */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  ALCARTA_MAX_REQUEST_WAIT_SECONDS: number = 14400;

  /** Bound on the delay of a lost doorbell: parked waits are re-checked (one query) this often. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(30)
  ALCARTA_WAIT_RECHECK_SECONDS: number = 15;

  /** Websocket delivery of waits (`delivery: "websocket"`); with off, `"any"` falls back to wait_id polling. */
  @IsIn(['on', 'off'])
  ALCARTA_WEBSOCKETS: 'on' | 'off' = 'on';

  /**
   * The experimental Events extension at 2026-07-28 (`io.modelcontextprotocol/events`: `events/list`,
   * `events/poll`); with off it is not in `server/discover` and its methods answer -32601.
   */
  @IsIn(['on', 'off'])
  ALCARTA_EVENTS_EXTENSION: 'on' | 'off' = 'on';

  /** How long a websocket URL may wait to be opened. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  ALCARTA_WS_CONNECT_TTL_SECONDS: number = 30;

  /** How long the result of a persisted wait is kept after it is fixed. */
  @Type(() => Number)
  @IsInt()
  @Min(60)
  ALCARTA_WAIT_RETENTION_SECONDS: number = 3600;

  /**
   * How often the housekeeping jobs delete old rows (finished approval mails, spent approval links,
   * long-expired console sessions, events past ALCARTA_EVENT_RETENTION_DAYS); the first run is a
   * minute after start, or sooner with a shorter interval.
   */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(86400)
  ALCARTA_HOUSEKEEPING_SECONDS: number = 3600;

  /**
   * Events (the log behind wait results) older than this many days are deleted by housekeeping.
   * Cursors and waits do not depend on old events, so this bounds the table without changing what
   * clients see.
   */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3650)
  ALCARTA_EVENT_RETENTION_DAYS: number = 30;

  /**
   * Audit entries older than this many days are pruned by housekeeping, which leaves a checkpoint
   * signed with a key derived from ALCARTA_SECRETS_KEY so what remains still verifies
   * (docs/audit.md). Without a secrets key nothing is pruned. 0 prunes every entry at each run.
   */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(36500)
  ALCARTA_AUDIT_RETENTION_DAYS: number = 365;

  /** Longest task lifetime (`ttl`) a client may ask for; longer requests are cut to this. */
  @Type(() => Number)
  @IsInt()
  @Min(60)
  ALCARTA_TASK_MAX_TTL_SECONDS: number = 86400;

  /** Working MCP tasks one token may have at a time. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  ALCARTA_MAX_ACTIVE_TASKS_PER_TOKEN: number = 100;

  /** The `pollInterval` suggested to clients polling tasks/get. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(60)
  ALCARTA_TASK_POLL_INTERVAL_SECONDS: number = 2;

  /** Blocking calls send an SSE comment (and progress, when asked) this often; at most 15 s. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(15)
  ALCARTA_KEEPALIVE_SECONDS: number = 10;

  /** A request's headers must arrive within this many seconds of its first byte, else the connection closes. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(300)
  ALCARTA_HEADERS_TIMEOUT_SECONDS: number = 10;

  /** A whole request (headers and body) must arrive within this many seconds, else the connection closes. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  ALCARTA_BODY_TIMEOUT_SECONDS: number = 30;

  /** A response the client has not read from for this many seconds is abandoned (its connection closed). */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  ALCARTA_UNREAD_RESPONSE_TIMEOUT_SECONDS: number = 60;

  /**
   * Connections the kernel queues for the HTTP listener before the server accepts them (Node's own
   * default is 511). Linux caps it at net.core.somaxconn.
   */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(65535)
  ALCARTA_LISTEN_BACKLOG: number = 4096;

  /** Requests per second per credential and replica (burst: twice that); 0 turns limiting off. */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  ALCARTA_RATE_LIMIT_PER_SECOND: number = 50;

  /**
   * Failed approval-link and console sign-in attempts per client address and minute (each kind on
   * its own, per replica), with bursts of as many; 0 turns the limit off.
   */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(10000)
  ALCARTA_CONSOLE_ATTEMPTS_PER_MINUTE: number = 10;

  /**
   * The reverse proxies whose X-Forwarded-For is believed: comma-separated addresses, CIDR ranges
   * or `loopback`, `linklocal`, `uniquelocal`. Empty: none; the client is the connection's peer.
   */
  @ValidateBy({
    name: 'isTrustedProxyList',
    validator: {
      validate: (value: unknown) => typeof value === 'string' && trustedProxyEntries(value).every(isTrustedProxyEntry),
      defaultMessage: () =>
        'ALCARTA_TRUSTED_PROXIES must list IP addresses, CIDR ranges (10.0.0.0/8) or loopback, linklocal, uniquelocal, separated by commas',
    },
  })
  ALCARTA_TRUSTED_PROXIES: string = '';

  /**
   * Webhook targets allowed although private: comma-separated host names or IP addresses. Webhooks
   * are never sent to loopback, private (RFC 1918, 100.64.0.0/10), link-local, unique-local,
   * multicast, reserved or cloud metadata addresses, checked at every connection, unless the URL's
   * host name or the address connected to is listed. Empty: only public addresses.
   */
  @ValidateBy({
    name: 'isWebhookAllowedHostList',
    validator: {
      validate: (value: unknown) =>
        typeof value === 'string' && webhookAllowedHostEntries(value).every(isWebhookAllowedHostEntry),
      defaultMessage: () =>
        'ALCARTA_WEBHOOK_ALLOWED_HOSTS must list host names or IP addresses (no ranges, ports or URLs), separated by commas',
    },
  })
  ALCARTA_WEBHOOK_ALLOWED_HOSTS: string = '';

  /** The inbound SMTP port, or `off`. */
  @Matches(/^(off|\d{1,5})$/, { message: 'ALCARTA_SMTP_PORT must be a port number or "off"' })
  ALCARTA_SMTP_PORT: string = '2525';

  /** The host name the SMTP server greets with and writes into Received/Authentication-Results. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  ALCARTA_SMTP_HOSTNAME?: string;

  /** The PEM certificate of STARTTLS; it is offered when this and ALCARTA_SMTP_TLS_KEY_FILE are set. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  ALCARTA_SMTP_TLS_CERT_FILE?: string;

  /** The PEM private key of ALCARTA_SMTP_TLS_CERT_FILE. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  ALCARTA_SMTP_TLS_KEY_FILE?: string;

  /** `required`: SMTP clients must authenticate with a `mail:ingest` token as the password. */
  @IsIn(['off', 'required'])
  ALCARTA_SMTP_AUTH: 'off' | 'required' = 'off';

  /** Concurrent SMTP sessions; more are answered 421 and retry later. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  ALCARTA_SMTP_MAX_CLIENTS: number = 100;

  /**
   * Bytes of inbound SMTP messages in flight (being received, parsed or stored) at most, server-wide;
   * past it a message is refused with 452 4.3.1 and its sender retries later.
   */
  @Type(() => Number)
  @IsInt()
  @Min(1024)
  ALCARTA_SMTP_MAX_BYTES_IN_FLIGHT: number = 64 * 1024 * 1024;

  /** Sender authentication (SPF, DKIM, DMARC, ARC) of inbound mail; `off` looks nothing up. */
  @IsIn(['on', 'off'])
  ALCARTA_MAIL_AUTH: 'on' | 'off' = 'on';

  /**
   * Outbound relay: smtp://user:pass@host:587 (STARTTLS) or smtps://user:pass@host:465 (TLS). For
   * local development, `console:` sends nothing: outbound mail is kept and shown at /console/outbox.
   * Unset: approved mail is recorded with delivery status `not_configured` and not sent.
   */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(/^(smtps?:\/\/[^\s]+|console:)$/, {
    message: 'ALCARTA_SMTP_RELAY_URL must be an smtp:// or smtps:// URL, or console:',
  })
  ALCARTA_SMTP_RELAY_URL?: string;

  /** The DKIM selector: outbound mail is signed for the mailbox's domain when this and the key file are set. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { message: 'ALCARTA_DKIM_SELECTOR must be a DNS label' })
  ALCARTA_DKIM_SELECTOR?: string;

  /** The PEM private key file for ALCARTA_DKIM_SELECTOR. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  ALCARTA_DKIM_PRIVATE_KEY_FILE?: string;

  /** Temporary delivery failures are retried for this long after the message was queued. */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  ALCARTA_SMTP_RETRY_MAX_SECONDS: number = 86400;

  /** First retry delay; each later one doubles (with jitter), capped at one hour. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  ALCARTA_SMTP_RETRY_BASE_SECONDS: number = 30;

  /** Webhook deliveries that keep failing are retried for this long after the event. */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  ALCARTA_WEBHOOK_RETRY_MAX_SECONDS: number = 86400;

  /** First webhook retry delay; each later one doubles (with jitter), capped at one hour. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  ALCARTA_WEBHOOK_RETRY_BASE_SECONDS: number = 5;

  /**
   * A replica's claim on a webhook delivery it is POSTing; after a crash another replica delivers it
   * again (same webhook-id) once the claim has lapsed. Longer than one attempt (10 s).
   */
  @Type(() => Number)
  @IsInt()
  @Min(15)
  @Max(3600)
  ALCARTA_WEBHOOK_LEASE_SECONDS: number = 60;

  /**
   * Webhook POSTs one replica makes at the same time (over all endpoints). 0: this replica delivers
   * no webhooks (it still queues them with every event; the other replicas deliver them).
   */
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(1024)
  ALCARTA_WEBHOOK_CONCURRENCY: number = 128;

  /**
   * A replica's claim on a message it is sending. A claim older than this (the replica died
   * mid-delivery) is taken over by another replica; one attempt is cut off well before it.
   */
  @Type(() => Number)
  @IsInt()
  @Min(2)
  @Max(3600)
  ALCARTA_OUTBOX_LEASE_SECONDS: number = 120;

  /**
   * The key that encrypts the secrets of connected mailboxes (passwords, refresh tokens, client
   * secrets) in the database with AES-256-GCM: 32 bytes, base64 (`openssl rand -base64 32`). Unset
   * with the embedded PostgreSQL (no DATABASE_URL): a key is generated once and kept in
   * `<ALCARTA_DATA_DIR>/secrets.key`; unset with DATABASE_URL: mailboxes cannot be connected.
   */
  @Transform(emptyToUndefined)
  @IsOptional()
  @ValidateBy(secretsKeyRule('ALCARTA_SECRETS_KEY'))
  ALCARTA_SECRETS_KEY?: string;

  /**
   * The ALCARTA_SECRETS_KEY before a rotation: secrets sealed with it are still read, and sealed
   * again with the current key when next used (a connection, a send, a test).
   */
  @Transform(emptyToUndefined)
  @IsOptional()
  @ValidateBy(secretsKeyRule('ALCARTA_SECRETS_KEY_PREVIOUS'))
  ALCARTA_SECRETS_KEY_PREVIOUS?: string;

  /**
   * A replica's lease on a connected mailbox folder it watches. A lease not renewed for this long
   * (the replica died) is taken over by another replica.
   */
  @Type(() => Number)
  @IsInt()
  @Min(5)
  @Max(3600)
  ALCARTA_IMAP_LEASE_SECONDS: number = 30;

  /** IMAP IDLE is ended and started again after this long; below RFC 2177's 29 minutes, when servers may drop it. */
  @Type(() => Number)
  @IsInt()
  @Min(10)
  @Max(1739)
  ALCARTA_IMAP_IDLE_SECONDS: number = 1500;

  /** The longest pause between attempts to reconnect to an IMAP server (the back-off doubles up to it). */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(86400)
  ALCARTA_IMAP_RETRY_MAX_SECONDS: number = 300;

  /** Connecting to an IMAP or SMTP server of a connected mailbox (TCP, TLS and sign-in) must finish within this long. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(300)
  ALCARTA_IMAP_CONNECT_TIMEOUT_SECONDS: number = 15;

  /** Connected mailbox folders one replica watches at most; the others are left to other replicas. */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  ALCARTA_IMAP_MAX_FOLDERS: number = 1000;

  /** The OAuth 2.1 authorization server whose JWT access tokens are accepted beside `alc_` tokens; unset: OAuth off. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  ALCARTA_OAUTH_ISSUER?: string;

  /** The issuer's JWKS, when its metadata does not name it (or to pin it). */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  ALCARTA_OAUTH_JWKS_URL?: string;

  /** Accepted `aud` values, comma-separated; empty: ALCARTA_PUBLIC_URL + "/mcp" (the RFC 8707 resource). */
  @IsString()
  ALCARTA_OAUTH_AUDIENCE: string = '';

  /** Removed from token scopes before they are matched to Alcarta's (e.g. "alcarta:"). */
  @IsString()
  ALCARTA_OAUTH_SCOPE_PREFIX: string = '';

  /** Whether a JWT may carry the `admin` scope at all. */
  @IsIn(['true', 'false'])
  ALCARTA_OAUTH_ALLOW_ADMIN: 'true' | 'false' = 'false';

  /** The claim that lists the principal's groups. */
  @IsString()
  ALCARTA_OAUTH_GROUPS_CLAIM: string = 'groups';

  /**
   * Seconds a failed fetch of the issuer's metadata or key set is remembered: meanwhile JWTs that
   * need a fetch are answered 503 at once, and the issuer is not asked again.
   */
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  ALCARTA_OAUTH_FAILURE_BACKOFF_SECONDS: number = 30;

  /** How far in the future a JWT's `exp` may lie; a token valid for longer is refused. */
  @Type(() => Number)
  @IsInt()
  @Min(300)
  @Max(366 * 24 * 3600)
  ALCARTA_OAUTH_MAX_TOKEN_LIFETIME_SECONDS: number = 24 * 3600;

  /** The approver console's OpenID Connect client id at ALCARTA_OAUTH_ISSUER; unset: people sign in with a token. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  ALCARTA_CONSOLE_CLIENT_ID?: string;

  /** The console client's secret, for a confidential client (PKCE is used either way). */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  ALCARTA_CONSOLE_CLIENT_SECRET?: string;

  /** Scopes a person signed in to the console has besides those of their token (space-separated). */
  @IsString()
  ALCARTA_CONSOLE_DEFAULT_SCOPES: string = '';
}

/** A secrets key: base64 of exactly 32 bytes (AES-256). */
function secretsKeyRule(variable: string) {
  return {
    name: 'isSecretsKey',
    validator: {
      validate: (value: unknown) => typeof value === 'string' && decodedKeyLength(value) === 32,
      defaultMessage: () => `${variable} must be 32 bytes in base64 (openssl rand -base64 32)`,
    },
  };
}

function decodedKeyLength(value: string): number {
  const trimmed = value.trim();
  // Buffer.from ignores what is not base64, so a wrong alphabet is refused before it can decode short.
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed)) return -1;
  return Buffer.from(trimmed, 'base64').length;
}

/** Validates raw environment variables; throws one error that lists every invalid variable. */
export function validateEnvironment(raw: Record<string, unknown>): Environment {
  const env = plainToInstance(Environment, raw, { exposeDefaultValues: true });
  const errors = validateSync(env, { whitelist: false, forbidUnknownValues: false });
  if (errors.length > 0) {
    const lines = errors.map((e) => `  ${e.property}: ${Object.values(e.constraints ?? {}).join('; ')}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return env;
}
