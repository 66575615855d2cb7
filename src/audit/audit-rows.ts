import { AuditCheckpoint, AuditEntry } from './audit-chain';

/** Runs one SQL statement and answers its rows: a TypeORM DataSource/EntityManager or a plain `pg` client. */
export type RowQuery = (sql: string, params: unknown[]) => Promise<Array<Record<string, unknown>>>;

const ENTRY_COLUMNS = `seq, at, action, actor, client_address, subject, prev_sha256, sha256`;

/** A row of `audit_log` as the entry that was hashed (docs/audit.md, "Entries"). */
export function entryOfRow(row: Record<string, unknown>): AuditEntry {
  return {
    seq: Number(row.seq),
    at: (row.at as Date).toISOString(),
    action: row.action as string,
    actor: row.actor as AuditEntry['actor'],
    client_address: (row.client_address as string | null) ?? null,
    subject: row.subject as Record<string, unknown>,
    prev_sha256: row.prev_sha256 as string,
    sha256: row.sha256 as string,
  };
}

/** Up to `limit` entries after `since`, in chain order. */
export async function entriesAfter(query: RowQuery, since: number, limit: number): Promise<AuditEntry[]> {
  const rows = await query(`SELECT ${ENTRY_COLUMNS} FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2`, [
    since,
    limit,
  ]);
  return rows.map(entryOfRow);
}

/** Every entry after `since`, read a batch at a time (an export or a verification of millions of rows). */
export async function* allEntriesAfter(query: RowQuery, since: number, batch = 5000): AsyncGenerator<AuditEntry> {
  let cursor = since;
  for (;;) {
    const page = await entriesAfter(query, cursor, batch);
    yield* page;
    if (page.length < batch) return;
    cursor = page[page.length - 1].seq;
  }
}

/** The checkpoint of the latest prune, if the log was ever pruned. */
export async function latestCheckpoint(query: RowQuery): Promise<AuditCheckpoint | undefined> {
  const [row] = await query(
    `SELECT seq, sha256, pruned_at, key_id, signature FROM audit_checkpoints ORDER BY seq DESC LIMIT 1`,
    [],
  );
  if (!row) return undefined;
  return {
    seq: Number(row.seq),
    sha256: row.sha256 as string,
    pruned_at: (row.pruned_at as Date).toISOString(),
    key_id: row.key_id as string,
    signature: row.signature as string,
  };
}

/** The head: the seq and hash of the last entry ever appended (seq 0 when none was). */
export async function auditHead(query: RowQuery): Promise<{ seq: number; sha256: string }> {
  const [row] = await query(`SELECT seq, sha256 FROM audit_head WHERE id = 1`, []);
  return { seq: Number(row.seq), sha256: row.sha256 as string };
}
