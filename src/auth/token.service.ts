import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { invalidRequest, notFound } from '../kernel/errors';
import { newId } from '../common/ids';
import { EventLog } from '../events/event-log';
import { AuditLog } from '../audit/audit-log';
import { MailboxService } from '../mail/mailbox.service';
import { Caller } from '../kernel/caller';
import { assignableMailboxes } from './mailbox-assignment';
import { CredentialRevocationHooks, hasLapsed } from './credential-revocation';
import { isScope, scopeSet } from '../kernel/scopes';
import { generateSecret, hashSecret, SECRET_SHAPE } from './token-secret';
import { TokenRepository } from './token.repository';
import { createdTokenView, tokenView } from './token.views';

export interface NewToken {
  name: string;
  scopes: string[];
  /** Mailbox ids, or `['*']` for every mailbox. */
  mailboxes: string[];
  expiresAt: Date | null;
  /** Use this secret instead of generating one (the bootstrap token from ALCARTA_BOOTSTRAP_TOKEN). */
  secret?: string;
}

/**
 * Tokens, administered by `admin` callers within their own mailboxes (docs/operators.md, "Limits
 * and hardening"): an admin bound to some mailboxes sees, creates and revokes only tokens bound
 * within them; only one bound to `*` reaches every token.
 */
@Injectable()
export class TokenService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly tokens: TokenRepository,
    private readonly mailboxes: MailboxService,
    private readonly revocationHooks: CredentialRevocationHooks,
    private readonly eventLog: EventLog,
    private readonly audit: AuditLog,
  ) {}

  /** Creates a token and returns its secret: the only moment the secret exists outside its holder. */
  async create(actor: Caller, input: NewToken, manager?: EntityManager) {
    const scopes = [...new Set(input.scopes)];
    const unknownScopes = scopes.filter((s) => !isScope(s));
    if (scopes.length === 0 || unknownScopes.length > 0) {
      throw invalidRequest('invalid_scopes', `Unknown scopes: ${unknownScopes.join(', ') || '(none given)'}.`, {
        field: 'scopes',
      });
    }
    const mailboxes = await assignableMailboxes(actor, input.mailboxes, 'tokens', this.mailboxes);
    if (input.expiresAt && input.expiresAt.getTime() <= Date.now()) {
      throw invalidRequest('expires_at_in_past', 'expires_at must be in the future.', { field: 'expires_at' });
    }
    const secret = input.secret ?? generateSecret();
    if (!SECRET_SHAPE.test(secret)) throw new Error('token secret has the wrong shape');
    const insert = (m: EntityManager) =>
      this.tokens
        .insert(
          {
            id: newId('tok'),
            name: input.name,
            secretHash: hashSecret(secret),
            scopes,
            mailboxes,
            expiresAt: input.expiresAt,
            revokedAt: null,
          },
          m,
        )
        .then(async (token) => {
          await this.audit.append(m, {
            action: 'token_created',
            actor,
            subject: { token_id: token.id, scopes, mailboxes, expires_at: token.expiresAt?.toISOString() ?? null },
          });
          return token;
        });
    const token = manager ? await insert(manager) : await this.dataSource.transaction(insert);
    return createdTokenView(token, secret);
  }

  /** The tokens within the actor's reach. */
  async list(actor: Caller) {
    return { tokens: (await this.tokens.list(actor.mailboxAccess)).map(tokenView) };
  }

  /**
   * Revokes a token within the actor's reach (others answer not_found, like unknown ones). In the
   * same transaction everything the token holds ends (see CredentialRevocationHooks) and the
   * `credential_revoked` doorbell tells every replica to end the token's parked waits and sockets.
   */
  async revoke(actor: Caller, tokenId: string): Promise<void> {
    const token = await this.tokens.findById(tokenId);
    if (!token || !actor.reaches(token.mailboxes)) throw notFound('token', tokenId);
    await this.dataSource.transaction(async (manager) => {
      if (!(await this.tokens.revoke(manager, tokenId))) return;
      await this.revocationHooks.revoke(manager, tokenId, 'token_revoked');
      await this.eventLog.ringDoorbell(manager, { kind: 'credential_revoked', tokenId });
      await this.audit.append(manager, { action: 'token_revoked', actor, subject: { token_id: tokenId } });
    });
  }

  /** The caller behind a bearer secret, or null when the secret is unknown, revoked or expired. */
  async authenticate(secret: string): Promise<Caller | null> {
    if (!SECRET_SHAPE.test(secret)) return null;
    // Before the read: a revocation committed after it still ends what this request parks.
    const authenticatedAt = Date.now();
    const token = await this.tokens.findByHash(hashSecret(secret));
    if (!token || hasLapsed(token)) return null;
    return new Caller(token.id, scopeSet(token.scopes), token.mailboxes, {
      expiresAt: token.expiresAt,
      authenticatedAt,
    });
  }
}
