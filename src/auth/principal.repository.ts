import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';

/**
 * Who a JWT names, as grants match it (docs/operators.md, "Identity providers"): its subject, its
 * client, its groups.
 */
export interface PrincipalClaims {
  subject: string;
  clientId: string | null;
  groups: readonly string[];
}

/** A principal's claims as its newest access token states them. */
export interface PrincipalClaimsRecord extends PrincipalClaims {
  id: string;
  issuer: string;
  scopes: readonly string[];
  email: string | null;
  issuedAt: Date;
}

/** Which principals a change concerns: listed ones, or those a grant's `principal` matches. */
export type PrincipalSelector = { ids: readonly string[] } | { grantPrincipal: string };

@Injectable()
export class PrincipalRepository {
  /**
   * Records the principal, or its changed claims when they come from a newer token than the stored
   * ones (a client alternating between an old and a new token cannot flip them back). True when the
   * stored claims are now these (written, or already the same); false when a newer token's differ.
   */
  async upsert(manager: EntityManager, p: PrincipalClaimsRecord): Promise<boolean> {
    const [row] = await manager.query<Array<{ current: boolean }>>(
      `WITH written AS (
         INSERT INTO principals (id, issuer, subject, client_id, groups, scopes, email, claims_issued_at)
         VALUES ($1, $2, $3, $4, $5::text[], $6::text[], $7, $8)
         ON CONFLICT (id) DO UPDATE
            SET client_id = EXCLUDED.client_id, groups = EXCLUDED.groups, scopes = EXCLUDED.scopes,
                email = EXCLUDED.email, claims_issued_at = EXCLUDED.claims_issued_at, updated_at = now()
          WHERE principals.claims_issued_at < EXCLUDED.claims_issued_at
            AND (principals.client_id, principals.groups, principals.scopes, principals.email)
                IS DISTINCT FROM (EXCLUDED.client_id, EXCLUDED.groups, EXCLUDED.scopes, EXCLUDED.email)
         RETURNING 1
       )
       SELECT EXISTS (SELECT 1 FROM written)
           OR EXISTS (SELECT 1 FROM principals
                       WHERE id = $1
                         AND (client_id, groups, scopes, email) IS NOT DISTINCT FROM ($4, $5::text[], $6::text[], $7))
           AS current`,
      [p.id, p.issuer, p.subject, p.clientId, [...p.groups], [...p.scopes], p.email, p.issuedAt],
    );
    return row.current;
  }

  /**
   * The mailboxes each selected principal reaches now (`['*']` for all), with the principals' rows
   * locked until the transaction ends, so that a concurrent change cannot slip between a read
   * before and a read after.
   */
  async reach(manager: EntityManager, selector: PrincipalSelector): Promise<Map<string, string[]>> {
    const [where, parameter] = matching(selector);
    const rows = await manager.query<Array<{ id: string; mailboxes: string[] }>>(
      `SELECT id, principal_mailboxes(subject, client_id, groups) AS mailboxes
         FROM principals WHERE ${where} FOR UPDATE`,
      [parameter],
    );
    return new Map(rows.map((r) => [r.id, r.mailboxes]));
  }
}

function matching(selector: PrincipalSelector): [string, unknown] {
  if ('ids' in selector) return ['id = ANY($1::text[])', [...selector.ids]];
  const colon = selector.grantPrincipal.indexOf(':');
  const kind = selector.grantPrincipal.slice(0, colon);
  const name = selector.grantPrincipal.slice(colon + 1);
  if (kind === 'sub') return ['subject = $1', name];
  if (kind === 'client') return ['client_id = $1', name];
  return ['$1 = ANY(groups)', name];
}
