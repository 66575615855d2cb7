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

/** What one attempt left a claimed delivery as (its claim released). */
export interface SettledWebhook {
  id: string;
  status: Extract<WebhookDeliveryStatus, 'delivered' | 'retrying' | 'failed'>;
  nextAttemptAt: Date | null;
  deliveredAt: Date | null;
  lastError: string | null;
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
   * every replica claim at once; times are the database's. `manager`: the worker's own pool.
   */
  async claimDue(manager: EntityManager, replicaId: string, leaseMs: number, limit: number): Promise<ClaimedWebhook[]> {
    const rows: Array<{
      id: string;
      endpoint_id: string;
      payload: Record<string, unknown>;
      attempts: number;
      created_at: Date;
    }> = await manager.query(
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

  /**
   * Of `ids`, those `replicaId` still holds the claim of, locked (in id order, so that two batches
   * never wait on each other crosswise), with their attempt numbers; also the database's clock.
   */
  async lockClaims(
    manager: EntityManager,
    ids: readonly string[],
    replicaId: string,
  ): Promise<{ attempts: Map<string, number>; now: Date }> {
    const rows: Array<{ id: string; attempts: number; now: Date }> = await manager.query(
      `SELECT id, attempts, now() AS now FROM webhook_deliveries
        WHERE id = ANY($1::text[]) AND status = 'sending' AND claimed_by = $2
        ORDER BY id
          FOR UPDATE`,
      [[...ids], replicaId],
    );
    const now = rows[0]?.now ?? (await manager.query<Array<{ now: Date }>>(`SELECT now() AS now`))[0].now;
    return { attempts: new Map(rows.map((r) => [r.id, r.attempts])), now };
  }

  /** The attempts of a batch, in one statement. */
  async recordAttempts(
    manager: EntityManager,
    attempts: ReadonlyArray<
      Pick<WebhookAttemptEntity, 'deliveryId' | 'n' | 'at' | 'statusCode' | 'error' | 'durationMs'>
    >,
  ): Promise<void> {
    if (attempts.length === 0) return;
    await manager.query(
      `INSERT INTO webhook_attempts (delivery_id, n, at, status_code, error, duration_ms)
       SELECT * FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::int[], $5::text[], $6::int[])`,
      [
        attempts.map((a) => a.deliveryId),
        attempts.map((a) => a.n),
        attempts.map((a) => a.at),
        attempts.map((a) => a.statusCode),
        attempts.map((a) => a.error),
        attempts.map((a) => a.durationMs),
      ],
    );
  }

  /** What the attempts of a batch left each delivery as, in one statement; each claim is released. */
  async settle(manager: EntityManager, settled: readonly SettledWebhook[]): Promise<void> {
    if (settled.length === 0) return;
    await manager.query(
      `UPDATE webhook_deliveries d
          SET status = s.status, next_attempt_at = s.next_attempt_at, delivered_at = s.delivered_at,
              last_error = s.last_error, claimed_by = NULL, lease_expires_at = NULL
         FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[])
           AS s(id, status, next_attempt_at, delivered_at, last_error)
        WHERE d.id = s.id`,
      [
        settled.map((s) => s.id),
        settled.map((s) => s.status),
        settled.map((s) => s.nextAttemptAt),
        settled.map((s) => s.deliveredAt),
        settled.map((s) => s.lastError),
      ],
    );
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
  async msUntilNextDue(manager: EntityManager): Promise<number | undefined> {
    const [row] = await manager.query<Array<{ ms: string | number | null }>>(
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
