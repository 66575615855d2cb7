import { Scope } from './scopes';

/** Which mailboxes a caller may see: queries are always filtered by this. */
export type MailboxAccess = { readonly all: true } | { readonly all: false; readonly ids: readonly string[] };

/** The authenticated token behind a request: who it is, what it may do, what it may see. */
export class Caller {
  readonly mailboxAccess: MailboxAccess;

  constructor(
    readonly tokenId: string,
    readonly scopes: ReadonlySet<Scope>,
    mailboxes: readonly string[],
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
}
