import { Scope } from './scopes';

/** Which mailboxes a caller may see: queries are always filtered by this. */
export type MailboxAccess = { readonly all: true } | { readonly all: false; readonly ids: readonly string[] };

/** The token something acts for, and when its access ends by itself. */
export interface Credential {
  readonly tokenId: string;
  /** The token's `expires_at`; null when it never expires. */
  readonly expiresAt: Date | null;
}

/** The authenticated token behind a request: who it is, what it may do, what it may see. */
export class Caller implements Credential {
  readonly mailboxAccess: MailboxAccess;

  constructor(
    readonly tokenId: string,
    readonly scopes: ReadonlySet<Scope>,
    mailboxes: readonly string[],
    readonly expiresAt: Date | null = null,
  ) {
    this.mailboxAccess = mailboxes.includes('*') ? { all: true } : { all: false, ids: mailboxes };
  }

  /** `admin` implies every other scope. */
  hasScope(scope: Scope): boolean {
    return this.scopes.has('admin') || this.scopes.has(scope);
  }

  hasAnyScope(scopes: readonly Scope[]): boolean {
    return scopes.length === 0 || scopes.some((s) => this.hasScope(s));
  }

  canSeeMailbox(mailboxId: string): boolean {
    return this.mailboxAccess.all || this.mailboxAccess.ids.includes(mailboxId);
  }

  /** Whether every one of `mailboxes` (ids, or `["*"]`) is within this caller's own. */
  reaches(mailboxes: readonly string[]): boolean {
    if (this.mailboxAccess.all) return true;
    return mailboxes.every((id) => id !== '*' && this.canSeeMailbox(id));
  }
}

/** The installation's operator (the CLI, the bootstrap): every scope on every mailbox, no token. */
export const OPERATOR = new Caller('operator', new Set<Scope>(['admin']), ['*']);
