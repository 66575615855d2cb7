import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { WebhookEndpointEntity } from '../webhooks/webhook-endpoint.entity';
import { EventSubscriptionEntity } from './event-subscription.entity';

/** A subscription with its endpoint (URL, secrets, expiry, failures). */
export interface SubscriptionRecord {
  subscription: EventSubscriptionEntity;
  endpoint: WebhookEndpointEntity;
}

/** Live: not ended, and its endpoint not expired (a disabled endpoint's subscription is live but suspended). */
const LIVE = `s.ended_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())`;

@Injectable()
export class EventSubscriptionRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The subscription and its endpoint, live or not; locked for a change within `manager`. */
  async findForUpdate(manager: EntityManager, id: string): Promise<SubscriptionRecord | null> {
    const subscription = await manager.findOne(EventSubscriptionEntity, {
      where: { id },
      lock: { mode: 'pessimistic_write' },
    });
    if (!subscription) return null;
    const endpoint = await manager.findOne(WebhookEndpointEntity, {
      where: { id },
      lock: { mode: 'pessimistic_write' },
    });
    return endpoint ? { subscription, endpoint } : null;
  }

  /** Whether it is live (see LIVE), judged by the database's clock. */
  async isLive(manager: EntityManager, id: string): Promise<boolean> {
    const rows: unknown[] = await manager.query(
      `SELECT 1 FROM event_subscriptions s JOIN webhook_endpoints e ON e.id = s.id WHERE s.id = $1 AND ${LIVE}`,
      [id],
    );
    return rows.length > 0;
  }

  /**
   * Whether the owner has a live subscription delivering to this URL: then the URL's consent to
   * receive them was verified already, and is not asked again for another event type or arguments.
   */
  async verifiedUrl(owner: string, url: string): Promise<boolean> {
    const rows: unknown[] = await this.dataSource.query(
      `SELECT 1 FROM event_subscriptions s JOIN webhook_endpoints e ON e.id = s.id
        WHERE s.owner = $1 AND s.url = $2 AND ${LIVE} LIMIT 1`,
      [owner, url],
    );
    return rows.length > 0;
  }

  /** Serializes the subscribe and unsubscribe calls of one subscription key, until the transaction ends. */
  async lockKey(manager: EntityManager, id: string): Promise<void> {
    await manager.query(`SELECT pg_advisory_xact_lock(hashtext('event_subscription:' || $1))`, [id]);
  }

  async insert(manager: EntityManager, endpoint: WebhookEndpointEntity, subscription: EventSubscriptionEntity) {
    await manager.insert(WebhookEndpointEntity, endpoint);
    await manager.save(EventSubscriptionEntity, subscription);
  }

  async update(
    manager: EntityManager,
    id: string,
    changes: Partial<Pick<EventSubscriptionEntity, 'feedCursor' | 'pages' | 'replayFloor' | 'endedAt'>>,
  ): Promise<void> {
    await manager.update(EventSubscriptionEntity, { id }, changes);
  }

  async touch(manager: EntityManager, id: string): Promise<void> {
    await manager.update(EventSubscriptionEntity, { id }, { refreshedAt: () => 'now()' });
  }

  /** Deletes the owner's subscription (its endpoint, and with it everything else); false: there was none. */
  async delete(manager: EntityManager, id: string, owner: string): Promise<boolean> {
    // A CTE ending in SELECT: TypeORM answers a bare DELETE as [rows, count].
    const [{ count }] = await manager.query<Array<{ count: number }>>(
      `WITH deleted AS (
         DELETE FROM webhook_endpoints e USING event_subscriptions s
          WHERE e.id = $1 AND s.id = e.id AND s.owner = $2 AND e.kind = 'events_subscription' RETURNING 1)
       SELECT count(*)::int AS count FROM deleted`,
      [id, owner],
    );
    return count > 0;
  }

  /** Removes what is left of a subscription that is no longer live, before one with its key is made anew. */
  async deleteStale(manager: EntityManager, id: string): Promise<void> {
    await manager.query(`DELETE FROM webhook_endpoints WHERE id = $1 AND kind = 'events_subscription'`, [id]);
  }

  /** The ids of the subscriptions whose feeds are read: live, and with an enabled endpoint. */
  async feedableIds(): Promise<string[]> {
    const rows: Array<{ id: string }> = await this.dataSource.query(
      `SELECT s.id FROM event_subscriptions s JOIN webhook_endpoints e ON e.id = s.id
        WHERE ${LIVE} AND e.enabled ORDER BY s.id`,
    );
    return rows.map((r) => r.id);
  }

  /**
   * The subscription, locked for its feeder, if it is still to be fed and no other replica's feeder
   * holds it now (SKIP LOCKED: that one reads its feed, and will read it again after what woke this one).
   */
  async lockFeedable(manager: EntityManager, id: string): Promise<EventSubscriptionEntity | null> {
    const rows: Array<{ id: string }> = await manager.query(
      `SELECT s.id FROM event_subscriptions s JOIN webhook_endpoints e ON e.id = s.id
        WHERE s.id = $1 AND ${LIVE} AND e.enabled
        FOR UPDATE OF s SKIP LOCKED`,
      [id],
    );
    if (rows.length === 0) return null;
    return manager.findOneBy(EventSubscriptionEntity, { id });
  }
}
