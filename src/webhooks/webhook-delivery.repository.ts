import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In } from 'typeorm';
import { deleteInBatches } from '../database/batched-delete';
import {
  WebhookAttemptEntity,
  WebhookDeliveryEntity,
  WebhookDeliveryKind,
  WebhookDeliveryStatus,
} from './webhook-delivery.entity';

/** A delivery this replica just claimed. */
export interface ClaimedWebhook {
  id: string;
  endpointId: string;
  kind: WebhookDeliveryKind;
  payload: Record<string, unknown>;
  /** The webhook-id when it is not `id`. */
  messageId: string | null;
  /** Occurrences: the cursor safe to persist once this one is acknowledged (see safeCursors). */
  safeCursor: string | null;
  attempts: number;
  createdAt: Date;
}

/** One occurrence of an Events-extension feed page, as queued. */
export interface QueuedOccurrence {
  /** The occurrence's eventId: the webhook-id of every attempt. */
  messageId: string;
  eventType: string;
  mailboxId: string | null;
  payload: Record<string, unknown>;
}

/** A page of a subscription's feed: its number and the feed's cursor before and after it. */
export interface FeedPageBounds {
  page: number;
  cursorBefore: string;
  cursorAfter: string;
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
const MATCHING_ENDPOINTS = `e.kind = 'endpoint' AND e.enabled AND $2::text = ANY(e.events) AND ('*' = ANY(e.mailbox_ids) OR $3::text = ANY(e.mailbox_ids))`;

/** An endpoint that gets deliveries: enabled and not expired. */
const LIVE_ENDPOINT = `e.id = d.endpoint_id AND e.enabled AND (e.expires_at IS NULL OR e.expires_at > now())`;

/**
 * Only deliveries of live endpoints are due: a disabled endpoint's wait until it is enabled, an
 * expired one's are removed with it.
 */
const DUE = `(
    (d.status IN ('queued', 'retrying') AND d.next_attempt_at <= now())
    OR (d.status = 'sending' AND d.lease_expires_at <= now())
  ) AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE ${LIVE_ENDPOINT})`;

const PENDING = `('queued', 'retrying', 'sending')`;

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
   * The occurrences of one page of an Events-extension subscription's feed, in its order, and
   * control envelopes (`bounds` null). Returns how many were queued.
   */
  async queueFeedDeliveries(
    manager: EntityManager,
    endpointId: string,
    kind: 'occurrence' | 'control',
    items: readonly QueuedOccurrence[],
    bounds: FeedPageBounds | null,
  ): Promise<number> {
    if (items.length === 0) return 0;
    await manager.query(
      `INSERT INTO webhook_deliveries (id, endpoint_id, kind, message_id, event_type, mailbox_id, payload, page,
                                       cursor_before, cursor_after, status, next_attempt_at)
       SELECT ${NEW_DELIVERY_ID}, $1, $2, item.message_id, item.event_type, item.mailbox_id, item.payload, $4, $5, $6,
              'queued', now()
         FROM jsonb_to_recordset($3::jsonb)
              AS item(message_id text, event_type text, mailbox_id text, payload jsonb)`,
      [
        endpointId,
        kind,
        JSON.stringify(
          items.map((i) => ({
            message_id: i.messageId,
            event_type: i.eventType,
            mailbox_id: i.mailboxId,
            payload: i.payload,
          })),
        ),
        bounds?.page ?? null,
        bounds?.cursorBefore ?? null,
        bounds?.cursorAfter ?? null,
      ],
    );
    return items.length;
  }

  /**
   * The cursor each claimed occurrence may carry: one that is safe to persist once it is
   * acknowledged, i.e. every occurrence of the feed before it has been delivered or given up. When
   * another occurrence of the same subscription at or before its page is still pending, that is the
   * cursor before the earliest such page; otherwise the cursor after its own page.
   */
  private async safeCursors(manager: EntityManager, ids: readonly string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows: Array<{ id: string; cursor: string }> = await manager.query(
      `SELECT c.id,
              coalesce((SELECT p.cursor_before FROM webhook_deliveries p
                         WHERE p.endpoint_id = c.endpoint_id AND p.page IS NOT NULL AND p.page <= c.page
                           AND p.status IN ${PENDING} AND p.id <> c.id
                         ORDER BY p.page LIMIT 1),
                       c.cursor_after) AS cursor
         FROM webhook_deliveries c WHERE c.id = ANY($1::text[])`,
      [ids],
    );
    return new Map(rows.map((r) => [r.id, r.cursor]));
  }

  /** The earliest pending page's cursor before it, for each of these endpoints that has one. */
  async pendingFeedCursors(endpointIds: readonly string[]): Promise<Map<string, string>> {
    if (endpointIds.length === 0) return new Map();
    const rows: Array<{ endpoint_id: string; cursor: string }> = await this.dataSource.query(
      `SELECT DISTINCT ON (endpoint_id) endpoint_id, cursor_before AS cursor FROM webhook_deliveries
        WHERE endpoint_id = ANY($1::text[]) AND page IS NOT NULL AND status IN ${PENDING}
        ORDER BY endpoint_id, page`,
      [endpointIds],
    );
    return new Map(rows.map((r) => [r.endpoint_id, r.cursor]));
  }

  /** The newest delivery attempt and the newest success of an endpoint (Events-extension delivery status). */
  async lastAttempts(
    endpointId: string,
  ): Promise<{ lastDeliveredAt: Date | null; lastError: string | null; lastStatus: number | null }> {
    const [row] = await this.dataSource.query<
      Array<{ delivered: Date | null; error: string | null; status_code: number | null }>
    >(
      `SELECT (SELECT max(delivered_at) FROM webhook_deliveries WHERE endpoint_id = $1) AS delivered,
              a.error, a.status_code
         FROM (SELECT 1) one
         LEFT JOIN LATERAL (
           SELECT a.error, a.status_code FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
            WHERE d.endpoint_id = $1 ORDER BY a.at DESC LIMIT 1) a ON true`,
      [endpointId],
    );
    return {
      lastDeliveredAt: row?.delivered ?? null,
      lastError: row?.error ?? null,
      lastStatus: row?.status_code ?? null,
    };
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
      kind: WebhookDeliveryKind;
      message_id: string | null;
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
           RETURNING d.id, d.endpoint_id, d.kind, d.message_id, d.payload, d.attempts, d.created_at
         )
         SELECT * FROM claimed`,
      [replicaId, leaseMs, limit],
    );
    // Worked out after the claim, so that what was claimed together counts as pending for each other.
    const cursors = await this.safeCursors(
      manager,
      rows.filter((r) => r.kind === 'occurrence').map((r) => r.id),
    );
    return rows.map((r) => ({
      id: r.id,
      endpointId: r.endpoint_id,
      kind: r.kind,
      messageId: r.message_id,
      payload: r.payload,
      safeCursor: cursors.get(r.id) ?? null,
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
        WHERE d.status IN ${PENDING} AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE ${LIVE_ENDPOINT})`,
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
