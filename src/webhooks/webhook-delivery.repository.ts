import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In } from 'typeorm';
import { deleteInBatches } from '../database/batched-delete';
import { WebhookAttemptEntity, WebhookDeliveryEntity, WebhookDeliveryStatus } from './webhook-delivery.entity';

/** A delivery this replica just claimed. */
export interface ClaimedWebhook {
  id: string;
  endpointId: string;
  payload: Record<string, unknown>;
  attempts: number;
  createdAt: Date;
}

/** A new delivery's id: `whd_` and 32 random hex digits (gen_random_uuid's 122 random bits). */
const NEW_DELIVERY_ID = `'whd_' || replace(gen_random_uuid()::text, '-', '')`;

/** The endpoints an event goes to: enabled, asking for its type, covering its mailbox. */
const MATCHING_ENDPOINTS = `e.enabled AND $2::text = ANY(e.events) AND ('*' = ANY(e.mailbox_ids) OR $3::text = ANY(e.mailbox_ids))`;

/** Only deliveries of enabled endpoints are due: a disabled endpoint's wait until it is enabled. */
const DUE = `(
    (d.status IN ('queued', 'retrying') AND d.next_attempt_at <= now())
    OR (d.status = 'sending' AND d.lease_expires_at <= now())
  ) AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.enabled)`;

@Injectable()
export class WebhookDeliveryRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * One delivery of the event per matching endpoint, in one statement in the event's transaction.
   * The body is the event's payload plus `cursor` (its id). Returns how many were queued.
   */
  async queueForEvent(
    manager: EntityManager,
    event: { id: string; type: string; mailboxId: string; payload: Record<string, unknown> },
  ): Promise<number> {
    const rows: unknown[] = await manager.query(
      `INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, mailbox_id, payload, status, next_attempt_at)
       SELECT ${NEW_DELIVERY_ID}, e.id, $1::bigint, $2, $3, $4::jsonb || jsonb_build_object('cursor', $5::text), 'queued', now()
         FROM webhook_endpoints e WHERE ${MATCHING_ENDPOINTS}
       RETURNING 1`,
      [event.id, event.type, event.mailboxId, JSON.stringify(event.payload), event.id],
    );
    return rows.length;
  }

  /**
   * New deliveries to one endpoint of the events after `sinceCursor` still in the event log that it
   * would get now (replay). Returns how many were queued.
   */
  async queueReplay(manager: EntityManager, endpointId: string, sinceCursor: string): Promise<number> {
    const rows: unknown[] = await manager.query(
      `INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, mailbox_id, payload, status, next_attempt_at)
       SELECT ${NEW_DELIVERY_ID}, e.id, ev.id, ev.type, ev.mailbox_id,
              ev.payload || jsonb_build_object('cursor', ev.id::text), 'queued', now()
         FROM webhook_endpoints e
         JOIN events ev ON ev.type = ANY(e.events) AND ('*' = ANY(e.mailbox_ids) OR ev.mailbox_id = ANY(e.mailbox_ids))
        WHERE e.id = $1 AND ev.id > $2::bigint AND ev.mailbox_id IS NOT NULL
        ORDER BY ev.id
       RETURNING 1`,
      [endpointId, sinceCursor],
    );
    return rows.length;
  }

  /**
   * Claims up to `limit` due deliveries for `replicaId` (queued or retrying ones whose time has
   * come, and `sending` ones whose lease lapsed: their replica died mid-delivery). SKIP LOCKED lets
   * every replica claim at once; times are the database's.
   */
  async claimDue(replicaId: string, leaseMs: number, limit: number): Promise<ClaimedWebhook[]> {
    const rows: Array<{
      id: string;
      endpoint_id: string;
      payload: Record<string, unknown>;
      attempts: number;
      created_at: Date;
    }> = await this.dataSource.query(
      `WITH due AS (
           SELECT d.id FROM webhook_deliveries d
            WHERE ${DUE}
            ORDER BY coalesce(d.next_attempt_at, d.lease_expires_at)
            LIMIT $3
            FOR UPDATE OF d SKIP LOCKED
         ), claimed AS (
           UPDATE webhook_deliveries d
              SET status = 'sending', claimed_by = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
                  attempts = d.attempts + 1, next_attempt_at = NULL
             FROM due
            WHERE d.id = due.id
           RETURNING d.id, d.endpoint_id, d.payload, d.attempts, d.created_at
         )
         SELECT * FROM claimed`,
      [replicaId, leaseMs, limit],
    );
    return rows.map((r) => ({
      id: r.id,
      endpointId: r.endpoint_id,
      payload: r.payload,
      attempts: r.attempts,
      createdAt: r.created_at,
    }));
  }

  /** The delivery, locked, if `replicaId` still holds its claim; also the database's clock. */
  async lockClaim(
    manager: EntityManager,
    id: string,
    replicaId: string,
  ): Promise<{ delivery: WebhookDeliveryEntity; now: Date } | null> {
    const delivery = await manager.findOne(WebhookDeliveryEntity, {
      where: { id, status: 'sending', claimedBy: replicaId },
      lock: { mode: 'pessimistic_write' },
    });
    if (!delivery) return null;
    const [{ now }] = await manager.query<Array<{ now: Date }>>(`SELECT now() AS now`);
    return { delivery, now };
  }

  async recordAttempt(
    manager: EntityManager,
    attempt: Pick<WebhookAttemptEntity, 'deliveryId' | 'n' | 'at' | 'statusCode' | 'error' | 'durationMs'>,
  ): Promise<void> {
    await manager.insert(WebhookAttemptEntity, attempt);
  }

  async update(
    manager: EntityManager,
    id: string,
    changes: Partial<
      Pick<
        WebhookDeliveryEntity,
        'status' | 'nextAttemptAt' | 'claimedBy' | 'leaseExpiresAt' | 'deliveredAt' | 'lastError'
      >
    >,
  ): Promise<void> {
    await manager.update(WebhookDeliveryEntity, { id }, changes);
  }

  /** An endpoint that was disabled gives up what it still had queued. */
  async failPending(manager: EntityManager, endpointId: string, error: string): Promise<void> {
    await manager.query(
      `UPDATE webhook_deliveries SET status = 'failed', last_error = $2, claimed_by = NULL, lease_expires_at = NULL,
              next_attempt_at = NULL
        WHERE endpoint_id = $1 AND status IN ('queued', 'retrying')`,
      [endpointId, error],
    );
  }

  /** Newest first, with their attempts (oldest first). */
  async listWithAttempts(
    endpointId: string,
    limit: number,
  ): Promise<Array<{ delivery: WebhookDeliveryEntity; attempts: WebhookAttemptEntity[] }>> {
    const deliveries = await this.dataSource.manager.find(WebhookDeliveryEntity, {
      where: { endpointId },
      order: { createdAt: 'DESC', eventId: 'DESC', id: 'DESC' },
      take: limit,
    });
    if (deliveries.length === 0) return [];
    const attempts = await this.dataSource.manager.find(WebhookAttemptEntity, {
      where: { deliveryId: In(deliveries.map((d) => d.id)) },
      order: { n: 'ASC' },
    });
    return deliveries.map((delivery) => ({
      delivery,
      attempts: attempts.filter((a) => a.deliveryId === delivery.id),
    }));
  }

  /** Milliseconds until the next delivery falls due (a retry, or a lease that lapses); undefined: none. */
  async msUntilNextDue(): Promise<number | undefined> {
    const [row] = await this.dataSource.query<Array<{ ms: string | number | null }>>(
      `SELECT extract(epoch FROM (min(coalesce(d.next_attempt_at, d.lease_expires_at)) - now())) * 1000 AS ms
         FROM webhook_deliveries d
        WHERE d.status IN ('queued', 'retrying', 'sending')
          AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.enabled)`,
    );
    return row?.ms === null || row?.ms === undefined ? undefined : Math.max(0, Number(row.ms));
  }

  /** Delivered and failed deliveries created before `cutoff`, with their attempts (housekeeping). */
  deleteFinishedBefore(cutoff: Date): Promise<number> {
    return deleteInBatches(
      this.dataSource.manager,
      'webhook_deliveries',
      `created_at < $1 AND status IN ('delivered', 'failed')`,
      [cutoff],
    );
  }

  /** Deliveries by status (for metrics). */
  async countsByStatus(): Promise<Map<WebhookDeliveryStatus, number>> {
    const rows: Array<{ status: WebhookDeliveryStatus; count: number }> = await this.dataSource.query(
      `SELECT status, count(*)::int AS count FROM webhook_deliveries GROUP BY status`,
    );
    return new Map(rows.map((r) => [r.status, r.count]));
  }

  /** Seconds since the oldest delivery still waiting was created; 0 when none waits. */
  async oldestPendingAgeSeconds(): Promise<number> {
    const [row] = await this.dataSource.query<Array<{ age: string | number }>>(
      `SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) AS age
         FROM webhook_deliveries WHERE status IN ('queued', 'retrying', 'sending')`,
    );
    return Math.max(0, Number(row?.age ?? 0));
  }
}
