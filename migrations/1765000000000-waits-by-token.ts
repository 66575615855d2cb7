import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Pending waits by token: revoking a token ends its pending waits in the revoking transaction, and
 * the periodic sweep ends those of expired tokens, without reading every pending wait.
 */
export class WaitsByToken1765000000000 implements MigrationInterface {
  name = 'WaitsByToken1765000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX waits_pending_token ON waits (token_id) WHERE status = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX waits_pending_token`);
  }
}
