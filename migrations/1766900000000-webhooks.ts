import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhooks (docs/webhooks.md): endpoints, one delivery per event and endpoint (written in the
 * transaction that writes the event, claimed by any replica like outbound mail), and each attempt of
 * a delivery. An endpoint's secrets are sealed with ALCARTA_SECRETS_KEY, since signing needs them.
 * A `webhook_disabled` event concerns an endpoint, which may cover every mailbox: such events have
 * no mailbox, so the event log's mailbox becomes optional.
 */
export class Webhooks1766900000000 implements MigrationInterface {
  name = 'Webhooks1766900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE events ALTER COLUMN mailbox_id DROP NOT NULL`);
    await q.query(`
      CREATE TABLE webhook_endpoints (
        id text PRIMARY KEY,
        url text NOT NULL,
        events text[] NOT NULL,
        mailbox_ids text[] NOT NULL,
        description text,
        secret_sealed text NOT NULL,
        previous_secret_sealed text,
        previous_secret_expires_at timestamptz,
        enabled boolean NOT NULL DEFAULT true,
        disabled_at timestamptz,
        disabled_reason text,
        failing_since timestamptz,
        created_by text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE webhook_deliveries (
        id text PRIMARY KEY,
        endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        event_id bigint NOT NULL,
        event_type text NOT NULL,
        mailbox_id text,
        payload jsonb NOT NULL,
        status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sending', 'retrying', 'delivered', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz,
        claimed_by text,
        lease_expires_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        delivered_at timestamptz,
        last_error text
      )`);
    await q.query(`CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at)`);
    await q.query(`CREATE INDEX webhook_deliveries_created_at ON webhook_deliveries (created_at)`);
    await q.query(`
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
        WHERE status IN ('queued', 'retrying')`);
    await q.query(`
      CREATE INDEX webhook_deliveries_leases ON webhook_deliveries (lease_expires_at)
        WHERE status = 'sending'`);
    await q.query(`
      CREATE TABLE webhook_attempts (
        delivery_id text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        n integer NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        status_code integer,
        error text,
        duration_ms integer NOT NULL,
        PRIMARY KEY (delivery_id, n)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE webhook_attempts`);
    await q.query(`DROP TABLE webhook_deliveries`);
    await q.query(`DROP TABLE webhook_endpoints`);
    await q.query(`DELETE FROM events WHERE mailbox_id IS NULL`);
    await q.query(`ALTER TABLE events ALTER COLUMN mailbox_id SET NOT NULL`);
  }
}
