import { EntityManager } from 'typeorm';

/** Rows one statement deletes at most: short statements, few locks, no long stall of other writers. */
export const DELETE_BATCH = 500;

/**
 * Deletes the rows of `table` that `where` selects (SQL over the table's own columns, with `params`
 * as $1, $2, …), DELETE_BATCH at a time, until none is left; answers how many it deleted. Rows that
 * someone holds locked (another replica deleting the same rows) are skipped, not waited for: safe
 * on every replica at once. For housekeeping, by the repository that owns `table`.
 */
export async function deleteInBatches(
  manager: EntityManager,
  table: string,
  where: string,
  params: unknown[],
): Promise<number> {
  let total = 0;
  for (;;) {
    // A CTE ending in SELECT: TypeORM answers a bare DELETE as [rows, count].
    const [row] = await manager.query<Array<{ count: number }>>(
      `WITH gone AS (
         DELETE FROM ${table}
          WHERE ctid IN (SELECT ctid FROM ${table} WHERE ${where} LIMIT $${params.length + 1} FOR UPDATE SKIP LOCKED)
         RETURNING 1
       )
       SELECT count(*)::int AS count FROM gone`,
      [...params, DELETE_BATCH],
    );
    total += row.count;
    if (row.count < DELETE_BATCH) return total;
  }
}
