import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Waits and tasks created with a JWT are bound to the OAuth principal (`prn_…`),
 * which has no row in `tokens`: the binding id is no longer always a token id.
 */
export class PrincipalBindings1765200000001 implements MigrationInterface {
  name = 'PrincipalBindings1765200000001';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE waits DROP CONSTRAINT waits_token_id_fkey`);
    await q.query(`ALTER TABLE tasks DROP CONSTRAINT tasks_token_id_fkey`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM tasks WHERE token_id LIKE 'prn\\_%'`);
    await q.query(`DELETE FROM waits WHERE token_id LIKE 'prn\\_%'`);
    await q.query(`ALTER TABLE waits ADD CONSTRAINT waits_token_id_fkey FOREIGN KEY (token_id) REFERENCES tokens (id)`);
    await q.query(`ALTER TABLE tasks ADD CONSTRAINT tasks_token_id_fkey FOREIGN KEY (token_id) REFERENCES tokens (id)`);
  }
}
