import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Persisted waits: waits delivered over a websocket (or polled by `wait_id`) outlive the request
 * and the replica that created them. Every replica watches the pending ones; the first to resolve
 * one fixes its result (`status` moves to `resolved` exactly once).
 */
export class PersistedWaits1764800000000 implements MigrationInterface {
  name = 'PersistedWaits1764800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE waits (
        id                 text PRIMARY KEY,
        token_id           text NOT NULL REFERENCES tokens (id),
        kind               text NOT NULL CHECK (kind IN ('message', 'request')),
        spec               jsonb NOT NULL,
        status             text NOT NULL CHECK (status IN ('pending', 'resolved')),
        result             jsonb,
        created_at         timestamptz NOT NULL DEFAULT now(),
        expires_at         timestamptz NOT NULL,
        resolved_at        timestamptz,
        ticket_hash        character(64),
        connect_deadline   timestamptz,
        ticket_consumed_at timestamptz,
        CONSTRAINT waits_ticket_hash_key UNIQUE (ticket_hash)
      )`);
    await q.query(`CREATE INDEX waits_pending ON waits (expires_at) WHERE status = 'pending'`);
    await q.query(`CREATE INDEX waits_resolved ON waits (resolved_at) WHERE status = 'resolved'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE waits`);
  }
}
