import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Separation of duties: the credential that asked for a request can never decide it. `created_by`
 * names a static token or an OAuth principal (iss + sub); a client acting for itself (client
 * credentials) is recognised by its client id as well, so each request records the client of the
 * access token that asked. Requests made before this stay NULL: they are still recognised by
 * `created_by`. A nullable column without a default rewrites nothing.
 */
export class RequesterClient1766230000000 implements MigrationInterface {
  name = 'RequesterClient1766230000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE approval_requests ADD COLUMN requester_client_id text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE approval_requests DROP COLUMN requester_client_id`);
  }
}
