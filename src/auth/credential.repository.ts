import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { Caller } from './caller';
import { TOKEN_LAPSED_SQL } from './credential-revocation';
import { scopeSet } from './scopes';

interface CredentialRow {
  id: string;
  scopes: string[];
  mailboxes: string[];
  expires_at: Date | null;
  issuer: string | null;
  subject: string | null;
  client_id: string | null;
  email: string | null;
}

/**
 * Rebuilds callers from binding ids alone, for work that outlives the request that started it
 * (stored waits, websocket tickets): a token as stored, or an OAuth principal with its newest
 * claims and the mailboxes its grants give now. Reads the `credentials` view (migration
 * 1765300000000), which puts tokens and principals side by side.
 */
@Injectable()
export class CredentialRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The callers of those ids that still have access (never a revoked or expired token). */
  async usable(ids: readonly string[]): Promise<Map<string, Caller>> {
    if (ids.length === 0) return new Map();
    const authenticatedAt = Date.now();
    const rows = await this.dataSource.query<CredentialRow[]>(
      `SELECT id, scopes, mailboxes, expires_at, issuer, subject, client_id, email
         FROM credentials t WHERE t.id = ANY($1::text[]) AND NOT ${TOKEN_LAPSED_SQL}`,
      [[...new Set(ids)]],
    );
    return new Map(rows.map((row) => [row.id, toCaller(row, authenticatedAt)]));
  }
}

function toCaller(row: CredentialRow, authenticatedAt: number): Caller {
  const principal =
    row.issuer !== null && row.subject !== null
      ? { issuer: row.issuer, subject: row.subject, clientId: row.client_id, email: row.email }
      : null;
  return new Caller(row.id, scopeSet(row.scopes), row.mailboxes, {
    expiresAt: row.expires_at,
    principal,
    authenticatedAt,
  });
}
