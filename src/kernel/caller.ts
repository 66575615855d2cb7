import { Scope } from './scopes';

/** Which mailboxes a caller may see: queries are always filtered by this. */
export type MailboxAccess = { readonly all: true } | { readonly all: false; readonly ids: readonly string[] };

/** Whether going from `before` to `after` (mailbox ids, or `['*']`) takes any mailbox away. */
export function losesMailbox(before: readonly string[], after: readonly string[]): boolean {
  if (after.includes('*')) return false;
  if (before.includes('*')) return true;
  return before.some((id) => !after.includes(id));
}

/** The token something acts for, and when its access ends by itself. */
export interface Credential {
  readonly tokenId: string;
  /** The token's `expires_at`; null when it never expires. */
  readonly expiresAt: Date | null;
  /**
   * When its access was last read from the database (ms since the epoch): a revocation that this
   * process learns of later, but that committed after this read, still ends what it holds.
   */
  readonly authenticatedAt: number;
}

/** Who an OAuth access token speaks for (docs/operators.md, "Identity providers"): the principal is `iss` + `sub`. */
export interface OAuthPrincipal {
  readonly issuer: string;
  readonly subject: string;
  /** `azp` or `client_id`; null when the token names no client. */
  readonly clientId: string | null;
  /** The `email` claim, when the token carries one. */
  readonly email: string | null;
  /** The groups claim (ALCARTA_OAUTH_GROUPS_CLAIM); none when unknown. Policies' `group:` approvers match it. */
  readonly groups?: readonly string[];
}

/**
 * The authenticated credential behind a request: who it is, what it may do, what it may see.
 * `tokenId` is the binding id: a static token's id, or an OAuth principal's `prn_…` (stable across
 * its access tokens).
 */
export class Caller implements Credential {
  readonly mailboxAccess: MailboxAccess;
  readonly expiresAt: Date | null;
  readonly principal: OAuthPrincipal | null;
  readonly authenticatedAt: number;

  constructor(
    readonly tokenId: string,
    readonly scopes: ReadonlySet<Scope>,
    mailboxes: readonly string[],
    options: { expiresAt?: Date | null; principal?: OAuthPrincipal | null; authenticatedAt?: number } = {},
  ) {
    this.mailboxAccess = mailboxes.includes('*') ? { all: true } : { all: false, ids: mailboxes };
    this.expiresAt = options.expiresAt ?? null;
    this.principal = options.principal ?? null;
    // Unknown: every revocation this process remembers applies.
    this.authenticatedAt = options.authenticatedAt ?? 0;
  }

  /** Who decisions record as `decided_by`: the principal's email, else its subject; else the token id. */
  get decidedBy(): string {
    if (!this.principal) return this.tokenId;
    return this.principal.email ?? this.principal.subject;
  }

  /** What request logs carry about the caller: never a secret, only ids. */
  get logIdentity(): Record<string, string> {
    if (!this.principal) return { token_id: this.tokenId };
    return {
      principal: this.tokenId,
      subject: this.principal.subject,
      ...(this.principal.clientId ? { client_id: this.principal.clientId } : {}),
    };
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
