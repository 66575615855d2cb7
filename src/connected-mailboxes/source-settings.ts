import { plainToInstance, Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsOptional,
  IsString,
  IsUrl,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
  validateSync,
} from 'class-validator';
import { invalidRequest } from '../kernel/errors';
import { validationError } from '../http/validation';

/** How a connection is protected: TLS from the first byte, STARTTLS, or nothing (loopback or a trusted network only). */
export type TlsMode = 'implicit' | 'starttls' | 'none';
export const TLS_MODES: readonly TlsMode[] = ['implicit', 'starttls', 'none'];

/** The state of one connected folder, as its holder last recorded it. */
export type FolderState = 'connecting' | 'idle' | 'syncing' | 'auth_failed' | 'unreachable';
/** The state of a mailbox's source: the worst of its folders, or `paused`. */
export type SourceState = FolderState | 'paused';

/** The account's settings as stored and shown: everything but the secrets. */
export interface SourceSettings {
  kind: 'imap';
  host: string;
  port: number;
  tls: TlsMode;
  username: string;
  auth:
    | { kind: 'password' }
    | { kind: 'xoauth2'; grant: Xoauth2Grant; token_url: string; client_id: string; scope: string | null };
  folders: string[];
  /** As given: `now`, `all` or an RFC 3339 time. */
  sync_from: string;
  /** The time mail is taken from: `sync_from`, with `now` fixed to when the source was configured; null for `all`. */
  sync_since: string | null;
  smtp: { host: string; port: number; tls: TlsMode } | null;
  save_sent: string | null;
  trusted_authserv_ids: string[];
  paused: boolean;
}

/**
 * How XOAUTH2 access tokens are obtained: with a person's refresh token (RFC 6749 6: Entra ID
 * delegated access, Google), as the application itself (RFC 6749 4.4, client credentials: Entra ID
 * `IMAP.AccessAsApp`), or with a service account's signed assertion (RFC 7523, JWT bearer: Google
 * domain-wide delegation, the account's user as the subject).
 */
export type Xoauth2Grant = 'refresh_token' | 'client_credentials' | 'jwt_bearer';

/** What SecretBox seals: the password, or the OAuth client's secret and refresh token or private key. */
export type SourceSecrets =
  { password: string } | { client_secret: string | null; refresh_token?: string; private_key?: string };

/** Where a server is and how to reach it: the IMAP server of a source, and its submission server. */
class ServerDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(253)
  host: string;

  @IsInt()
  @Min(1)
  @Max(65535)
  port: number;

  @IsIn(TLS_MODES, { message: 'tls must be one of implicit, starttls, none' })
  tls: TlsMode;
}

class Xoauth2Dto {
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  @MaxLength(2000)
  token_url: string;

  @IsString()
  @IsNotEmpty()
  @MaxLength(500)
  client_id: string;

  @IsOptional()
  @IsString()
  @MaxLength(2000)
  client_secret?: string;

  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(8000)
  refresh_token?: string;

  /** A service account's private key (PEM), for the JWT-bearer grant. */
  @IsOptional()
  @Matches(/^-----BEGIN (RSA )?PRIVATE KEY-----[\s\S]{1,16000}-----END (RSA )?PRIVATE KEY-----\s*$/, {
    message: 'private_key must be a PEM private key',
  })
  private_key?: string;

  @IsOptional()
  @IsString()
  @MaxLength(2000)
  scope?: string;
}

class AuthDto {
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(1000)
  password?: string;

  @IsOptional()
  @ValidateNested()
  @Type(() => Xoauth2Dto)
  xoauth2?: Xoauth2Dto;
}

/**
 * A folder name as IMAP LIST returns it: a hierarchy delimiter allowed, no control characters (a
 * line break would end the IMAP command) and no LIST wildcards.
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what it refuses
const FOLDER_NAME = /^[^\u0000-\u001f\u007f*%]{1,200}$/;

/** A complete source (after a PATCH is merged onto the stored one). */
class SourceDto extends ServerDto {
  @IsIn(['imap'], { message: 'kind must be "imap"' })
  kind: 'imap';

  @IsString()
  @IsNotEmpty()
  @MaxLength(320)
  username: string;

  @ValidateNested()
  @Type(() => AuthDto)
  auth: AuthDto;

  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(20)
  @Matches(FOLDER_NAME, { each: true, message: 'each folder must be a folder name of 1 to 200 characters' })
  folders?: string[];

  @IsOptional()
  @Matches(/^(now|all|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))$/, {
    message: 'sync_from must be "now", "all" or an RFC 3339 time',
  })
  sync_from?: string;

  @IsOptional()
  @ValidateNested()
  @Type(() => ServerDto)
  smtp?: ServerDto | null;

  @IsOptional()
  @Matches(FOLDER_NAME, { message: 'save_sent must be a folder name of 1 to 200 characters' })
  save_sent?: string | null;

  @IsOptional()
  @IsArray()
  @ArrayMaxSize(20)
  @Matches(/^[A-Za-z0-9.-]{1,253}$/, { each: true, message: 'each trusted_authserv_ids entry must be a host name' })
  trusted_authserv_ids?: string[];

  @IsOptional()
  @IsBoolean()
  paused?: boolean;
}

/** A source checked and split: the settings to store and show, the secrets to seal. */
export interface PreparedSource {
  settings: SourceSettings;
  /** Absent: keep the stored secrets (a PATCH without `auth`). */
  secrets: SourceSecrets | undefined;
}

/**
 * Checks a source given whole (a new one) or merged onto the stored settings (a PATCH: the keys it
 * gives replace the stored ones, `auth` whole; without `auth` the stored credentials stay). Throws
 * `invalid_source` naming the field. `now` is when `sync_from: "now"` is fixed.
 */
export function prepareSource(input: unknown, stored: SourceSettings | undefined, now: Date): PreparedSource {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw invalidRequest('invalid_source', 'source must be an object (or null to disconnect the account).', {
      field: 'source',
    });
  }
  const given = input as Record<string, unknown>;
  const keepsAuth = stored !== undefined && !('auth' in given);
  const merged: Record<string, unknown> = stored
    ? { ...storedAsInput(stored), ...given, ...(keepsAuth && { auth: {} }) }
    : given;
  const dto = plainToInstance(SourceDto, merged);
  const errors = validateSync(dto, { whitelist: true, forbidNonWhitelisted: true, forbidUnknownValues: true });
  if (errors.length > 0) {
    const error = validationError(errors);
    throw invalidRequest('invalid_source', `source: ${error.message}`, {
      field: `source.${String(error.details.field)}`,
    });
  }
  const auth = keepsAuth ? stored.auth : authOf(dto.auth);
  const folders = [...new Set(dto.folders ?? ['INBOX'])];
  const saveSent = dto.save_sent ?? null;
  if (saveSent !== null && folders.includes(saveSent)) {
    throw invalidRequest(
      'invalid_source',
      `source: save_sent (${saveSent}) cannot also be a synced folder: the copies of sent mail would come back as received mail.`,
      { field: 'source.save_sent' },
    );
  }
  const syncFrom = dto.sync_from ?? 'now';
  // The pattern lets a month 13 or an hour 25 through; such a time has no instant to sync from.
  if (syncFrom !== 'now' && syncFrom !== 'all' && Number.isNaN(Date.parse(syncFrom))) {
    throw invalidRequest('invalid_source', `source: sync_from (${syncFrom}) is not a valid time.`, {
      field: 'source.sync_from',
    });
  }
  const sameStart = stored && stored.sync_from === syncFrom;
  const settings: SourceSettings = {
    kind: 'imap',
    host: dto.host.trim().toLowerCase(),
    port: dto.port,
    tls: dto.tls,
    username: dto.username,
    auth,
    folders,
    sync_from: syncFrom,
    sync_since: sameStart
      ? stored.sync_since
      : syncFrom === 'all'
        ? null
        : syncFrom === 'now'
          ? now.toISOString()
          : new Date(syncFrom).toISOString(),
    smtp: dto.smtp ? { host: dto.smtp.host.trim().toLowerCase(), port: dto.smtp.port, tls: dto.smtp.tls } : null,
    save_sent: saveSent,
    trusted_authserv_ids: [...new Set((dto.trusted_authserv_ids ?? []).map((id) => id.toLowerCase()))],
    paused: dto.paused ?? false,
  };
  return { settings, secrets: keepsAuth ? undefined : secretsOf(dto.auth) };
}

function authOf(auth: AuthDto): SourceSettings['auth'] {
  assertOneAuth(auth);
  return auth.xoauth2
    ? {
        kind: 'xoauth2',
        grant: grantOf(auth.xoauth2),
        token_url: auth.xoauth2.token_url,
        client_id: auth.xoauth2.client_id,
        scope: auth.xoauth2.scope ?? null,
      }
    : { kind: 'password' };
}

function secretsOf(auth: AuthDto): SourceSecrets {
  return auth.xoauth2
    ? {
        client_secret: auth.xoauth2.client_secret ?? null,
        ...(auth.xoauth2.refresh_token !== undefined && { refresh_token: auth.xoauth2.refresh_token }),
        ...(auth.xoauth2.private_key !== undefined && { private_key: auth.xoauth2.private_key }),
      }
    : { password: auth.password! };
}

/** A refresh token, or a private key, or neither (the client's secret alone): one grant each. */
function grantOf(xoauth2: Xoauth2Dto): Xoauth2Grant {
  if (xoauth2.refresh_token !== undefined && xoauth2.private_key !== undefined) {
    throw invalidRequest('invalid_source', 'source: auth.xoauth2 takes a refresh_token or a private_key, not both.', {
      field: 'source.auth.xoauth2',
    });
  }
  if (xoauth2.refresh_token !== undefined) return 'refresh_token';
  if (xoauth2.private_key !== undefined) return 'jwt_bearer';
  if (xoauth2.client_secret === undefined) {
    throw invalidRequest(
      'invalid_source',
      'source: auth.xoauth2 needs a refresh_token (delegated access), a private_key (a service account) or a client_secret (application access).',
      { field: 'source.auth.xoauth2.refresh_token' },
    );
  }
  return 'client_credentials';
}

function assertOneAuth(auth: AuthDto): void {
  if ((auth.password === undefined) === (auth.xoauth2 === undefined)) {
    throw invalidRequest('invalid_source', 'source: auth must hold exactly one of "password" or "xoauth2".', {
      field: 'source.auth',
    });
  }
}

/** The stored settings in the input's shape (without `auth`, whose secrets are not stored in them). */
function storedAsInput(stored: SourceSettings): Record<string, unknown> {
  return {
    kind: stored.kind,
    host: stored.host,
    port: stored.port,
    tls: stored.tls,
    username: stored.username,
    folders: stored.folders,
    sync_from: stored.sync_from,
    smtp: stored.smtp,
    save_sent: stored.save_sent,
    trusted_authserv_ids: stored.trusted_authserv_ids,
    paused: stored.paused,
  };
}

/** Whether a change of settings needs a new connection check (and makes holders reconnect). */
export function connectionChanged(before: SourceSettings, after: SourceSettings, newSecrets: boolean): boolean {
  const key = (s: SourceSettings) =>
    JSON.stringify([s.host, s.port, s.tls, s.username, s.auth, s.folders, s.smtp, s.save_sent]);
  return newSecrets || key(before) !== key(after);
}
