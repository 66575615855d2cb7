import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tokens, mailboxes, messages, approval requests and the event log.
 *
 * `mailboxes.message_seq` is the per-mailbox message counter behind cursors: see
 * src/mail/message-sequence.ts for why it makes resumption exact under concurrent writers.
 */
export class Foundation1764700000000 implements MigrationInterface {
  name = 'Foundation1764700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tokens (
        id          text PRIMARY KEY,
        name        text NOT NULL,
        secret_hash character(64) NOT NULL,
        scopes      text[] NOT NULL,
        mailboxes   text[] NOT NULL,
        expires_at  timestamptz,
        revoked_at  timestamptz,
        created_at  timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT tokens_secret_hash_key UNIQUE (secret_hash)
      )`);
    await q.query(`
      CREATE TABLE mailboxes (
        id          text PRIMARY KEY,
        cursor_key  integer GENERATED ALWAYS AS IDENTITY,
        address     text NOT NULL,
        name        text,
        message_seq bigint NOT NULL DEFAULT 0,
        created_at  timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT mailboxes_cursor_key_key UNIQUE (cursor_key),
        CONSTRAINT mailboxes_address_key UNIQUE (address)
      )`);
    await q.query(`
      CREATE TABLE messages (
        id                text PRIMARY KEY,
        mailbox_id        text NOT NULL REFERENCES mailboxes (id),
        mailbox_seq       bigint NOT NULL,
        direction         text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
        from_address      text NOT NULL,
        to_addresses      text[] NOT NULL,
        cc_addresses      text[] NOT NULL,
        subject           text NOT NULL,
        text_body         text NOT NULL,
        html_body         text,
        message_id_header text,
        in_reply_to       text,
        thread_id         text NOT NULL,
        received_at       timestamptz NOT NULL,
        created_at        timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT messages_mailbox_seq_key UNIQUE (mailbox_id, mailbox_seq)
      )`);
    // Idempotent ingest: one inbound message per Message-ID per mailbox.
    await q.query(`
      CREATE UNIQUE INDEX messages_inbound_message_id_key ON messages (mailbox_id, message_id_header)
        WHERE direction = 'inbound' AND message_id_header IS NOT NULL`);
    await q.query(`CREATE INDEX messages_thread_lookup ON messages (mailbox_id, message_id_header)`);
    await q.query(`
      CREATE TABLE approval_requests (
        id          text PRIMARY KEY,
        mailbox_id  text NOT NULL REFERENCES mailboxes (id),
        kind        text NOT NULL CHECK (kind IN ('send_email', 'approval')),
        state       text NOT NULL CHECK (state IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')),
        title       text NOT NULL,
        details     text,
        email       jsonb,
        created_by  text NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now(),
        expires_at  timestamptz NOT NULL,
        decided_at  timestamptz,
        decided_by  text,
        reason      text,
        sent_message_id text REFERENCES messages (id)
      )`);
    await q.query(`CREATE INDEX approval_requests_mailbox_created ON approval_requests (mailbox_id, created_at)`);
    await q.query(
      `CREATE INDEX approval_requests_pending_expiry ON approval_requests (expires_at) WHERE state = 'pending'`,
    );
    await q.query(`
      CREATE TABLE events (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        type        text NOT NULL,
        mailbox_id  text NOT NULL REFERENCES mailboxes (id),
        message_id  text REFERENCES messages (id),
        request_id  text REFERENCES approval_requests (id),
        payload     jsonb NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX events_request ON events (request_id, id) WHERE request_id IS NOT NULL`);
    await q.query(`CREATE INDEX events_message ON events (message_id) WHERE message_id IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE events`);
    await q.query(`DROP TABLE approval_requests`);
    await q.query(`DROP TABLE messages`);
    await q.query(`DROP TABLE mailboxes`);
    await q.query(`DROP TABLE tokens`);
  }
}
