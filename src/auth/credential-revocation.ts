import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';

/**
 * Why a credential lost its access; the `reason` of the `unauthorized` errors that end its work.
 * `access_removed`: an OAuth principal lost a mailbox (a grant was deleted, or its groups changed).
 */
export type AccessEndReason = 'token_revoked' | 'token_expired' | 'access_removed';

/**
 * What a module that keeps things for tokens (waits, tasks) does when a token loses its access.
 * The auth module knows nothing of those things: the modules register here at construction, so
 * their dependencies keep pointing at auth and never back.
 */
export interface CredentialRevocationHook {
  /** Ends what the token holds, inside the transaction that revokes it. */
  revoke(manager: EntityManager, tokenId: string, reason: AccessEndReason): Promise<void>;
  /**
   * Ends what revoked or expired tokens still hold (batched statements, not one per token);
   * returns the ids of the tokens it ended something for.
   */
  revokeLapsed(manager: EntityManager): Promise<string[]>;
}

@Injectable()
export class CredentialRevocationHooks {
  private readonly hooks: CredentialRevocationHook[] = [];

  register(hook: CredentialRevocationHook): void {
    this.hooks.push(hook);
  }

  async revoke(manager: EntityManager, tokenId: string, reason: AccessEndReason): Promise<void> {
    for (const hook of this.hooks) await hook.revoke(manager, tokenId, reason);
  }

  async revokeLapsed(manager: EntityManager): Promise<string[]> {
    const tokenIds = new Set<string>();
    for (const hook of this.hooks) for (const id of await hook.revokeLapsed(manager)) tokenIds.add(id);
    return [...tokenIds];
  }
}

/** Whether a token has lost its access (revoked, or past `expires_at`). */
export function hasLapsed(token: { revokedAt: Date | null; expiresAt: Date | null }): boolean {
  return token.revokedAt !== null || (token.expiresAt !== null && token.expiresAt.getTime() <= Date.now());
}

/** The same in SQL, on a `tokens` row aliased `t` (never NULL, so it can be negated). */
export const TOKEN_LAPSED_SQL = '(t.revoked_at IS NOT NULL OR (t.expires_at IS NOT NULL AND t.expires_at <= now()))';

/** The SQL expression (on `t`) of why a lapsed token lost its access. */
export const LAPSE_REASON_SQL = `CASE WHEN t.revoked_at IS NOT NULL THEN 'token_revoked' ELSE 'token_expired' END`;
