import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Caller } from '../kernel/caller';
import { CredentialRepository } from '../auth/credential.repository';
import { scopeSet } from '../kernel/scopes';
import { TokenService } from '../auth/token.service';
import { AppConfig } from '../config/app-config';
import { EventLog } from '../events/event-log';
import { AuditLog } from '../audit/audit-log';
import { ConsoleSessionRepository } from './console-session.repository';

/**
 * How long a console session lasts at most: for a pasted token never beyond its expiry; for an
 * OpenID Connect principal exactly this (the access token's expiry does not end it).
 */
export const SESSION_LIFETIME_MS = 12 * 3600 * 1000;

/** A session found from its cookie: the credential as the database has it now, and its CSRF token. */
export interface ActiveSession {
  /** The SHA-256 of the cookie's secret, as stored: what names this session in doorbells. */
  readonly id: string;
  readonly caller: Caller;
  readonly csrfToken: string;
  /** When the session runs out: its live streams end then. */
  readonly expiresAt: Date;
}

export type SessionLookup =
  | { readonly kind: 'active'; readonly session: ActiveSession }
  /** The cookie names a session that ran out of time, or whose credential lost its access. */
  | { readonly kind: 'ended'; readonly why: 'expired' | 'access_ended' }
  | { readonly kind: 'none' };

export type SignInResult =
  | { readonly ok: true; readonly secret: string; readonly expiresAt: Date }
  | { readonly ok: false; readonly problem: 'unknown_token' | 'missing_scope' };

/**
 * Console sessions (docs/approvers.md): the cookie holds a random secret, the database only its SHA-256,
 * so any replica serves any click and deleting the row ends the session everywhere. The session
 * stores only the credential's id: scopes and mailboxes are read again at every request, so a
 * revoked token ends its sessions at the next click. CSRF tokens are an HMAC of the session
 * secret, which only this session's holder can present.
 */
@Injectable()
export class ConsoleSessionService {
  constructor(
    private readonly sessions: ConsoleSessionRepository,
    private readonly tokens: TokenService,
    private readonly credentials: CredentialRepository,
    private readonly config: AppConfig,
    private readonly eventLog: EventLog,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly audit: AuditLog,
  ) {}

  /** Starts a session for a pasted token that may decide approvals. */
  async signInWithToken(tokenSecret: string): Promise<SignInResult> {
    const caller = await this.tokens.authenticate(tokenSecret.trim());
    if (!caller) return { ok: false, problem: 'unknown_token' };
    if (!caller.hasScope('approvals:decide')) return { ok: false, problem: 'missing_scope' };
    const limit = Date.now() + SESSION_LIFETIME_MS;
    return this.start(caller, new Date(caller.expiresAt ? Math.min(limit, caller.expiresAt.getTime()) : limit));
  }

  /**
   * Starts a session for an OAuth principal that signed in through OpenID Connect, if its token's
   * scopes or the console's default scopes let it decide.
   */
  async signInAsPrincipal(caller: Caller): Promise<SignInResult> {
    if (!this.withDefaultScopes(caller).hasScope('approvals:decide')) return { ok: false, problem: 'missing_scope' };
    return this.start(caller, new Date(Date.now() + SESSION_LIFETIME_MS));
  }

  private async start(caller: Caller, expiresAt: Date): Promise<SignInResult> {
    const secret = randomBytes(32).toString('base64url');
    await this.dataSource.transaction(async (manager) => {
      await this.sessions.insert({ secretHash: hashOf(secret), credentialId: caller.tokenId, expiresAt }, manager);
      await this.audit.append(manager, {
        action: 'console_signed_in',
        actor: caller,
        subject: { expires_at: expiresAt.toISOString() },
      });
    });
    return { ok: true, secret, expiresAt };
  }

  async lookup(secret: string | undefined): Promise<SessionLookup> {
    if (!secret) return { kind: 'none' };
    const row = await this.sessions.findByHash(hashOf(secret));
    if (!row) return { kind: 'none' };
    // The row stays (housekeeping removes it a lifetime later), so every tab of the session, and a
    // person coming back, is told that it expired rather than sent to sign in without a word.
    if (row.expiresAt.getTime() <= Date.now()) return { kind: 'ended', why: 'expired' };
    const stored = (await this.credentials.usable([row.credentialId])).get(row.credentialId);
    const caller = stored && this.withDefaultScopes(stored);
    if (!caller || !caller.hasScope('approvals:decide')) {
      await this.sessions.delete(row.secretHash);
      return { kind: 'ended', why: 'access_ended' };
    }
    return {
      kind: 'active',
      session: { id: row.secretHash, caller, csrfToken: csrfTokenOf(secret), expiresAt: row.expiresAt },
    };
  }

  /**
   * A principal's scopes plus ALCARTA_CONSOLE_DEFAULT_SCOPES (never admin): for IdPs that cannot
   * put Alcarta scopes into a person's token. A pasted token keeps exactly its own scopes.
   */
  private withDefaultScopes(caller: Caller): Caller {
    if (!caller.principal) return caller;
    const defaults = [...scopeSet(this.config.consoleDefaultScopes)].filter((s) => s !== 'admin');
    if (defaults.every((s) => caller.scopes.has(s))) return caller;
    const mailboxes = caller.mailboxAccess.all ? ['*'] : caller.mailboxAccess.ids;
    return new Caller(caller.tokenId, new Set([...caller.scopes, ...defaults]), mailboxes, {
      expiresAt: caller.expiresAt,
      principal: caller.principal,
      authenticatedAt: caller.authenticatedAt,
    });
  }

  /**
   * Ends the session on every replica: they all read the same row, and the `session_ended`
   * doorbell of the same transaction tells each to end the session's live streams now.
   */
  async signOut(session: ActiveSession): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      if (await this.sessions.deleteIn(manager, session.id)) {
        await this.eventLog.ringDoorbell(manager, { kind: 'session_ended', sessionId: session.id });
      }
    });
  }

  /** Which of these sessions (by id) still exist. */
  existing(ids: readonly string[]): Promise<Set<string>> {
    return this.sessions.existing(ids);
  }
}

/** Whether `presented` is the CSRF token of the session, compared in constant time. */
export function isCsrfTokenOf(session: ActiveSession, presented: unknown): boolean {
  if (typeof presented !== 'string') return false;
  const expected = Buffer.from(session.csrfToken);
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function csrfTokenOf(secret: string): string {
  return createHmac('sha256', secret).update('alcarta-console-csrf').digest('base64url');
}

function hashOf(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}
