import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Connected mailboxes: a mailbox backed by an existing IMAP account. `mailbox_sources` holds the
 * account's settings (secrets only sealed with ALCARTA_SECRETS_KEY) and its visible state;
 * `mailbox_source_folders` the sync position of each connected folder and the replica holding it;
 * `imap_sync_holders` the leases of the replicas that hold folders (as `wait_owners` does for waits).
 */
export class ConnectedMailboxes1765500000000 implements MigrationInterface {
  name = 'ConnectedMailboxes1765500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE mailbox_sources (
        mailbox_id     text PRIMARY KEY REFERENCES mailboxes (id),
        settings       jsonb NOT NULL,
        sealed_secrets text NOT NULL,
        revision       integer NOT NULL DEFAULT 1,
        state          text NOT NULL DEFAULT 'connecting',
        last_error     text,
        last_sync_at   timestamptz,
        behind_since   timestamptz,
        created_at     timestamptz NOT NULL DEFAULT now(),
        updated_at     timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE imap_sync_holders (
        id                  text PRIMARY KEY,
        lease_expires_at    timestamptz NOT NULL,
        listener_pid        integer,
        listener_started_at timestamptz
      )`);
    await q.query(`
      CREATE TABLE mailbox_source_folders (
        mailbox_id        text NOT NULL REFERENCES mailbox_sources (mailbox_id) ON DELETE CASCADE,
        folder            text NOT NULL,
        uid_validity      bigint,
        last_uid          bigint NOT NULL DEFAULT 0,
        initial_next_uid  bigint,
        initial_until_uid bigint,
        holder            text REFERENCES imap_sync_holders (id) ON DELETE SET NULL,
        state             text NOT NULL DEFAULT 'connecting',
        last_error        text,
        last_sync_at      timestamptz,
        PRIMARY KEY (mailbox_id, folder)
      )`);
    await q.query(`CREATE INDEX mailbox_source_folders_holder ON mailbox_source_folders (holder)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE mailbox_source_folders`);
    await q.query(`DROP TABLE imap_sync_holders`);
    await q.query(`DROP TABLE mailbox_sources`);
  }
}
