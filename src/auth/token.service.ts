import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { invalidRequest, notFound } from '../common/errors';
import { newId } from '../common/ids';
import { MailboxService } from '../mail/mailbox.service';
import { Caller } from './caller';
import { isScope, Scope } from './scopes';
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

@Injectable()
export class TokenService {
  constructor(
    private readonly tokens: TokenRepository,
    private readonly mailboxes: MailboxService,
  ) {}

  /** Creates a token and returns its secret: the only moment the secret exists outside its holder. */
  async create(input: NewToken, manager?: EntityManager) {
    const scopes = [...new Set(input.scopes)];
    const unknownScopes = scopes.filter((s) => !isScope(s));
    if (scopes.length === 0 || unknownScopes.length > 0) {
      throw invalidRequest('invalid_scopes', `Unknown scopes: ${unknownScopes.join(', ') || '(none given)'}.`, {
        field: 'scopes',
      });
    }
    const mailboxes = [...new Set(input.mailboxes)];
    if (mailboxes.length === 0 || (mailboxes.includes('*') && mailboxes.length > 1)) {
      throw invalidRequest('invalid_mailboxes', 'mailboxes is either ["*"] or a non-empty list of mailbox ids.', {
        field: 'mailboxes',
      });
    }
    const unknownMailboxes = mailboxes.includes('*') ? [] : await this.mailboxes.unknownIds(mailboxes);
    if (unknownMailboxes.length > 0) {
      throw invalidRequest('unknown_mailbox', `No such mailboxes: ${unknownMailboxes.join(', ')}.`, {
        field: 'mailboxes',
        mailbox_ids: unknownMailboxes,
      });
    }
    if (input.expiresAt && input.expiresAt.getTime() <= Date.now()) {
      throw invalidRequest('expires_at_in_past', 'expires_at must be in the future.', { field: 'expires_at' });
    }
    const secret = input.secret ?? generateSecret();
    if (!SECRET_SHAPE.test(secret)) throw new Error('token secret has the wrong shape');
    const token = await this.tokens.insert(
      {
        id: newId('tok'),
        name: input.name,
        secretHash: hashSecret(secret),
        scopes,
        mailboxes,
        expiresAt: input.expiresAt,
        revokedAt: null,
      },
      manager,
    );
    return createdTokenView(token, secret);
  }

  async list() {
    return { tokens: (await this.tokens.list()).map(tokenView) };
  }

  async revoke(tokenId: string): Promise<void> {
    if (!(await this.tokens.findById(tokenId))) throw notFound('token', tokenId);
    await this.tokens.revoke(tokenId);
  }

  /** The caller behind a bearer secret, or null when the secret is unknown, revoked or expired. */
  async authenticate(secret: string): Promise<Caller | null> {
    if (!SECRET_SHAPE.test(secret)) return null;
    const token = await this.tokens.findByHash(hashSecret(secret));
    if (!token || token.revokedAt || (token.expiresAt && token.expiresAt.getTime() <= Date.now())) return null;
    return new Caller(token.id, new Set<Scope>(token.scopes.filter(isScope)), token.mailboxes);
  }
}
