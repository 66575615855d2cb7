import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { Caller } from '../kernel/caller';
import { TOKEN_LAPSED_SQL } from './credential-revocation';
import { scopeSet } from '../kernel/scopes';

interface CredentialRow {
  id: string;
  scopes: string[];
  mailboxes: string[];
  expires_at: Date | null;
  issuer: string | null;
  subject: string | null;
  client_id: string | null;
  email: string | null;
  groups: string[] | null;
}

/**
 * Rebuilds callers from binding ids alone, for work that outlives the request that started it
 * (stored waits, websocket tickets): a token as stored, or an OAuth principal with its newest
 * claims and the mailboxes its grants give now; and names credentials for the people who decide.
 * Reads the `credentials` view (migrations 1765300000000, 1765600000000), which puts tokens and
 * principals side by side.
 */
@Injectable()
export class CredentialRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * The callers of those ids that still have access (never a revoked or expired token); inside
   * `manager`'s transaction when one is given.
   */
  async usable(ids: readonly string[], manager: EntityManager = this.dataSource.manager): Promise<Map<string, Caller>> {
    if (ids.length === 0) return new Map();
    const authenticatedAt = Date.now();
    const rows = await manager.query<CredentialRow[]>(
      `SELECT id, scopes, mailboxes, expires_at, issuer, subject, client_id, email, groups
         FROM credentials t WHERE t.id = ANY($1::text[]) AND NOT ${TOKEN_LAPSED_SQL}`,
      [[...new Set(ids)]],
    );
    return new Map(rows.map((row) => [row.id, toCaller(row, authenticatedAt)]));
  }

  /**
   * The names of those ids, in one query: a token's name; a principal's email, else its client id,
   * else its subject. Revoked and expired credentials keep their names (history still shows who
   * asked); ids that name no credential (the operator, a decider's address) are left out.
   */
  async namesOf(ids: readonly string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await this.dataSource.query<Array<{ id: string; name: string }>>(
      `SELECT id, name FROM credentials WHERE id = ANY($1::text[])`,
      [[...new Set(ids)]],
    );
    return new Map(rows.map((row) => [row.id, row.name]));
  }
}

function toCaller(row: CredentialRow, authenticatedAt: number): Caller {
  const principal =
    row.issuer !== null && row.subject !== null
      ? {
          issuer: row.issuer,
          subject: row.subject,
          clientId: row.client_id,
          email: row.email,
          groups: row.groups ?? [],
        }
      : null;
  return new Caller(row.id, scopeSet(row.scopes), row.mailboxes, {
    expiresAt: row.expires_at,
    principal,
    authenticatedAt,
  });
}
