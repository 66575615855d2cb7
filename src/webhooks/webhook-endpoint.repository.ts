import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, In, Repository } from 'typeorm';
import { MailboxAccess } from '../kernel/caller';
import { WebhookEndpointEntity } from './webhook-endpoint.entity';

export type EndpointChanges = Partial<
  Pick<
    WebhookEndpointEntity,
    | 'url'
    | 'events'
    | 'mailboxIds'
    | 'description'
    | 'enabled'
    | 'disabledAt'
    | 'disabledReason'
    | 'failingSince'
    | 'secretSealed'
    | 'previousSecretSealed'
    | 'previousSecretExpiresAt'
    | 'expiresAt'
  >
>;

/**
 * The REST endpoints a caller manages: all of them with access to every mailbox; else those whose
 * mailboxes are all within the caller's (an endpoint of `*` belongs to no tenant alone). The
 * endpoints of Events-extension subscriptions are their clients' alone (events/subscribe).
 */
function visibleTo(access: MailboxAccess): { sql: string; params: unknown[] } {
  if (access.all) return { sql: `e.kind = 'endpoint'`, params: [] };
  return {
    sql: `e.kind = 'endpoint' AND NOT ('*' = ANY(e.mailbox_ids)) AND e.mailbox_ids <@ $1::text[]`,
    params: [[...access.ids]],
  };
}

@Injectable()
export class WebhookEndpointRepository {
  constructor(@InjectRepository(WebhookEndpointEntity) private readonly endpoints: Repository<WebhookEndpointEntity>) {}

  async insert(manager: EntityManager, endpoint: WebhookEndpointEntity): Promise<void> {
    await manager.insert(WebhookEndpointEntity, endpoint);
  }

  /** Newest first. */
  async list(access: MailboxAccess): Promise<WebhookEndpointEntity[]> {
    const where = visibleTo(access);
    const ids: Array<{ id: string }> = await this.endpoints.query(
      `SELECT e.id FROM webhook_endpoints e WHERE ${where.sql} ORDER BY e.created_at DESC, e.id DESC`,
      where.params,
    );
    if (ids.length === 0) return [];
    const rows = await this.endpoints.findBy({ id: In(ids.map((r) => r.id)) });
    const byId = new Map(rows.map((r) => [r.id, r]));
    return ids.map((r) => byId.get(r.id)!).filter(Boolean);
  }

  /** The endpoint if the caller may manage it; locked for a change when `manager` is given. */
  async findVisible(id: string, access: MailboxAccess, manager?: EntityManager): Promise<WebhookEndpointEntity | null> {
    const where = visibleTo(access);
    const runner = manager ?? this.endpoints.manager;
    const rows: Array<{ id: string }> = await runner.query(
      `SELECT e.id FROM webhook_endpoints e WHERE e.id = $${where.params.length + 1} AND ${where.sql}
       ${manager ? 'FOR UPDATE' : ''}`,
      [...where.params, id],
    );
    if (rows.length === 0) return null;
    return runner.findOneBy(WebhookEndpointEntity, { id });
  }

  async update(manager: EntityManager, id: string, changes: EndpointChanges): Promise<void> {
    await manager.update(WebhookEndpointEntity, { id }, { ...changes, updatedAt: () => 'now()' });
  }

  async delete(manager: EntityManager, id: string): Promise<void> {
    await manager.delete(WebhookEndpointEntity, { id });
  }

  findByIds(manager: EntityManager, ids: readonly string[]): Promise<WebhookEndpointEntity[]> {
    return manager.findBy(WebhookEndpointEntity, { id: In([...ids]) });
  }

  /**
   * The endpoints, locked in id order (the worker's outcomes of their deliveries; the same order in
   * every batch, so that two batches never wait on each other crosswise). FOR NO KEY UPDATE: the
   * outcomes change no key, and this lock does not wait for (nor hold up) the ingest transactions
   * that queue deliveries, whose foreign key holds FOR KEY SHARE on the endpoint until they commit.
   */
  findManyForUpdate(manager: EntityManager, ids: readonly string[]): Promise<WebhookEndpointEntity[]> {
    return manager.find(WebhookEndpointEntity, {
      where: { id: In([...ids]) },
      order: { id: 'ASC' },
      lock: { mode: 'for_no_key_update' },
    });
  }

  /** Removes endpoints whose time is up, with their deliveries (housekeeping). */
  async deleteExpired(): Promise<number> {
    // A CTE ending in SELECT: TypeORM answers a bare DELETE as [rows, count].
    const [{ count }] = await this.endpoints.query<Array<{ count: number }>>(
      `WITH deleted AS (DELETE FROM webhook_endpoints WHERE expires_at IS NOT NULL AND expires_at <= now() RETURNING 1)
       SELECT count(*)::int AS count FROM deleted`,
    );
    return count;
  }

  /** Seconds each failing endpoint has been failing (for metrics). */
  async failingSeconds(): Promise<Array<{ id: string; seconds: number }>> {
    const rows: Array<{ id: string; seconds: string | number }> = await this.endpoints.query(
      `SELECT id, extract(epoch FROM now() - failing_since) AS seconds
         FROM webhook_endpoints WHERE enabled AND failing_since IS NOT NULL`,
    );
    return rows.map((r) => ({ id: r.id, seconds: Math.max(0, Number(r.seconds)) }));
  }
}
