import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * MCP Tasks (revision 2025-11-25): a task wraps a persisted wait, is bound to the token that
 * created it, and keeps its own copy of the result (the wait row may be purged before the task).
 */
export class Tasks1764900000000 implements MigrationInterface {
  name = 'Tasks1764900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tasks (
        id               text PRIMARY KEY,
        token_id         text NOT NULL REFERENCES tokens (id),
        wait_id          text REFERENCES waits (id) ON DELETE SET NULL,
        status           text NOT NULL CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
        status_message   text,
        result           jsonb,
        created_at       timestamptz NOT NULL DEFAULT now(),
        last_updated_at  timestamptz NOT NULL DEFAULT now(),
        ttl_ms           bigint NOT NULL,
        poll_interval_ms integer NOT NULL,
        expires_at       timestamptz NOT NULL,
        CONSTRAINT tasks_wait_id_key UNIQUE (wait_id)
      )`);
    await q.query(`CREATE INDEX tasks_token_order ON tasks (token_id, created_at, id)`);
    await q.query(`CREATE INDEX tasks_expiry ON tasks (expires_at)`);
    await q.query(`CREATE INDEX tasks_working ON tasks (token_id) WHERE status = 'working'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE tasks`);
  }
}
