import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhook delivery of the Events extension (docs/agents.md, "Events extension"): an
 * `events/subscribe` subscription is a webhook endpoint of kind `events_subscription` whose id is
 * the subscription's id, expiring with its TTL, plus a row of `event_subscriptions` (who asked, for
 * which event type and arguments, and how far its feed has been read). Its deliveries are
 * `occurrence`s of the feed, in pages (`page`, the feed's cursor before and after it, from which a
 * delivery's safe-to-persist cursor is worked out when it is sent) and `control` envelopes; they
 * carry their own `webhook-id` (`message_id`: the event's id) and need no event log id.
 */
export class EventSubscriptions1767000000000 implements MigrationInterface {
  name = 'EventSubscriptions1767000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN kind text NOT NULL DEFAULT 'endpoint' CHECK (kind IN ('endpoint', 'events_subscription')),
        ADD COLUMN expires_at timestamptz`);
    await q.query(`
      CREATE INDEX webhook_endpoints_expiring ON webhook_endpoints (expires_at) WHERE expires_at IS NOT NULL`);
    await q.query(`
      ALTER TABLE webhook_deliveries
        ALTER COLUMN event_id DROP NOT NULL,
        ADD COLUMN kind text NOT NULL DEFAULT 'event' CHECK (kind IN ('event', 'occurrence', 'control')),
        ADD COLUMN message_id text,
        ADD COLUMN page bigint,
        ADD COLUMN cursor_before text,
        ADD COLUMN cursor_after text`);
    await q.query(`
      CREATE INDEX webhook_deliveries_pending_pages ON webhook_deliveries (endpoint_id, page)
        WHERE page IS NOT NULL AND status IN ('queued', 'retrying', 'sending')`);
    await q.query(`
      CREATE TABLE event_subscriptions (
        id text PRIMARY KEY REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        owner text NOT NULL,
        url text NOT NULL,
        name text NOT NULL,
        arguments jsonb NOT NULL,
        feed_cursor text NOT NULL,
        pages bigint NOT NULL DEFAULT 0,
        replay_floor timestamptz,
        ended_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        refreshed_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX event_subscriptions_owner_url ON event_subscriptions (owner, url)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE event_subscriptions`);
    await q.query(`DELETE FROM webhook_endpoints WHERE kind = 'events_subscription'`);
    await q.query(`DROP INDEX webhook_deliveries_pending_pages`);
    await q.query(`
      ALTER TABLE webhook_deliveries
        DROP COLUMN kind, DROP COLUMN message_id, DROP COLUMN page, DROP COLUMN cursor_before,
        DROP COLUMN cursor_after, ALTER COLUMN event_id SET NOT NULL`);
    await q.query(`DROP INDEX webhook_endpoints_expiring`);
    await q.query(`ALTER TABLE webhook_endpoints DROP COLUMN kind, DROP COLUMN expires_at`);
  }
}
