import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { RequestState } from '../approvals/approval-request.entity';
import { MailboxAccess } from '../kernel/caller';
import { AccessEndReason, LAPSE_REASON_SQL, TOKEN_LAPSED_SQL } from '../auth/credential-revocation';
import { DeliveryEventPayload, RequestEventPayload } from '../events/event-log';
import { deliveryView } from '../outbox/delivery.views';
import { DeliveryFailure, DeliveryStatus } from '../outbox/outbound-delivery.entity';
import { MessageAuthentication } from '../mail/message-authentication';
import { latestDeliveryEvent, latestRequestEvent } from './pruned-events';
import { MessageRow, RequestRow } from './waiters';
import { RecordedApproval } from '../approvals/approval-policy';

export interface MailboxHead {
  mailboxId: string;
  cursorKey: number;
  seq: number;
}

/** The reads of the wait engine. Every one is a single statement: one snapshot, one round trip. */
@Injectable()
export class WaitRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Newest position of each mailbox in scope (all mailboxes when `access.all`). */
  async heads(access: MailboxAccess): Promise<MailboxHead[]> {
    const rows = await this.dataSource.query<Array<{ id: string; cursor_key: number; message_seq: string }>>(
      `SELECT id, cursor_key, message_seq FROM mailboxes WHERE $1::boolean OR id = ANY($2::text[])`,
      [access.all, access.all ? [] : access.ids],
    );
    return rows.map((r) => ({ mailboxId: r.id, cursorKey: r.cursor_key, seq: Number(r.message_seq) }));
  }

  /**
   * Messages after the given position of each mailbox, mailbox by mailbox (cursor_key order) and
   * in sequence order within a mailbox, at most `limit`. Because positions are gap-free and become
   * visible in order, the rows of each mailbox are contiguous from its position.
   */
  async messagesAfter(
    positions: ReadonlyArray<{ mailboxId: string; after: number }>,
    limit: number,
  ): Promise<MessageRow[]> {
    if (positions.length === 0) return [];
    const rows = await this.dataSource.query<
      Array<{
        id: string;
        mailbox_id: string;
        cursor_key: number;
        mailbox_seq: string;
        direction: 'inbound' | 'outbound';
        from_address: string;
        subject: string;
        received_at: Date;
        authentication: MessageAuthentication;
        from_verified: boolean;
      }>
    >(
      `SELECT m.id, m.mailbox_id, b.cursor_key, m.mailbox_seq, m.direction, m.from_address, m.subject, m.received_at,
              m.authentication, m.from_verified
         FROM unnest($1::text[], $2::bigint[]) AS p(mailbox_id, after)
         JOIN messages m ON m.mailbox_id = p.mailbox_id AND m.mailbox_seq > p.after
         JOIN mailboxes b ON b.id = m.mailbox_id
        ORDER BY b.cursor_key, m.mailbox_seq
        LIMIT $3`,
      [positions.map((p) => p.mailboxId), positions.map((p) => p.after), limit],
    );
    return rows.map((r) => ({
      id: r.id,
      mailboxId: r.mailbox_id,
      cursorKey: r.cursor_key,
      seq: Number(r.mailbox_seq),
      direction: r.direction,
      from: r.from_address,
      subject: r.subject,
      receivedAt: r.received_at,
      authentication: r.authentication,
      fromVerified: r.from_verified,
    }));
  }

  /**
   * Current state and latest transition of each listed request the access allows, with the
   * delivery of its approved email (if any) and that delivery's latest status change. An event
   * past the retention may be gone: the request and delivery rows stand in for it (pruned-events).
   */
  async requests(ids: readonly string[], access: MailboxAccess): Promise<RequestRow[]> {
    if (ids.length === 0) return [];
    const rows = await this.dataSource.query<
      Array<{
        id: string;
        state: RequestState;
        created_at: Date;
        decided_at: Date | null;
        quorum: number;
        approvals: RecordedApproval[];
        payload: RequestEventPayload | null;
        delivery_mailbox_id: string | null;
        delivery_message_id: string | null;
        delivery_status: DeliveryStatus | null;
        attempts: number | null;
        last_attempt_at: Date | null;
        next_attempt_at: Date | null;
        response: string | null;
        error: string | null;
        reason: DeliveryFailure | null;
        delivery_updated_at: Date | null;
        delivery_payload: DeliveryEventPayload | null;
      }>
    >(
      `SELECT r.id, r.state, r.created_at, r.decided_at, r.quorum, r.approvals, e.payload,
              d.mailbox_id AS delivery_mailbox_id, d.message_id AS delivery_message_id,
              d.status AS delivery_status, d.attempts, d.last_attempt_at, d.next_attempt_at, d.response, d.error, d.reason,
              d.updated_at AS delivery_updated_at, de.payload AS delivery_payload
         FROM approval_requests r
         LEFT JOIN LATERAL (SELECT payload FROM events
                             WHERE request_id = r.id AND type = 'request_state_changed'
                             ORDER BY id DESC LIMIT 1) e ON true
         LEFT JOIN outbound_deliveries d ON d.message_id = r.sent_message_id
         LEFT JOIN LATERAL (SELECT payload FROM events
                             WHERE d.message_id IS NOT NULL AND request_id = r.id
                               AND type = 'message_delivery_changed'
                             ORDER BY id DESC LIMIT 1) de ON true
        WHERE r.id = ANY($1::text[]) AND ($2::boolean OR r.mailbox_id = ANY($3::text[]))`,
      [ids, access.all, access.all ? [] : access.ids],
    );
    return rows.map((r) => ({
      id: r.id,
      state: r.state,
      latest: latestRequestEvent(r.payload, {
        id: r.id,
        state: r.state,
        createdAt: r.created_at,
        decidedAt: r.decided_at,
      }),
      delivery:
        r.delivery_status === null
          ? undefined
          : deliveryView({
              status: r.delivery_status,
              attempts: r.attempts!,
              lastAttemptAt: r.last_attempt_at,
              nextAttemptAt: r.next_attempt_at,
              response: r.response,
              error: r.error,
              reason: r.reason,
            }),
      ...(r.quorum > 1 && { approvals: r.approvals.map(({ by, at, reason }) => ({ by, at, reason })) }),
      latestDelivery:
        r.delivery_status === null
          ? undefined
          : latestDeliveryEvent(r.delivery_payload, {
              mailboxId: r.delivery_mailbox_id!,
              messageId: r.delivery_message_id!,
              requestId: r.id,
              status: r.delivery_status,
              updatedAt: r.delivery_updated_at!,
            }),
    }));
  }

  /**
   * The safety re-check of every parked wait of this process in one statement: heads of the
   * watched mailboxes, states of the watched requests and of their deliveries, how many pending
   * persisted waits `owner` owns, which of the awaited persisted results are fixed, and which
   * of the tokens the waits act for were revoked or expired, and what the OAuth principals among
   * them reach now.
   */
  async probe(
    mailboxes: MailboxAccess,
    requestIds: readonly string[],
    resultWaitIds: readonly string[],
    tokenIds: readonly string[],
    owner: string | undefined,
  ): Promise<{
    heads: MailboxHead[];
    states: Map<string, RequestState>;
    deliveries: Map<string, DeliveryStatus>;
    ownedWaits: number;
    resolvedWaits: string[];
    lapsedTokens: Map<string, AccessEndReason>;
    principalMailboxes: Map<string, string[]>;
  }> {
    const rows = await this.dataSource.query<
      Array<{
        kind: 'm' | 'r' | 'd' | 'p' | 'x' | 't' | 'g';
        id: string;
        cursor_key: number | null;
        value: string | null;
      }>
    >(
      `SELECT 'm' AS kind, id, cursor_key, message_seq::text AS value
         FROM mailboxes WHERE $1::boolean OR id = ANY($2::text[])
       UNION ALL
       SELECT 'r', id, NULL, state FROM approval_requests WHERE id = ANY($3::text[])
       UNION ALL
       SELECT 'd', r.id, NULL, d.status
         FROM approval_requests r JOIN outbound_deliveries d ON d.message_id = r.sent_message_id
        WHERE r.id = ANY($3::text[])
       UNION ALL
       SELECT 'p', '', NULL, count(*)::text FROM waits WHERE owner = $6 AND status = 'pending'
       UNION ALL
       SELECT 'x', id, NULL, NULL FROM waits WHERE id = ANY($4::text[]) AND status = 'resolved'
       UNION ALL
       SELECT 't', t.id, NULL, ${LAPSE_REASON_SQL} FROM tokens t WHERE t.id = ANY($5::text[]) AND ${TOKEN_LAPSED_SQL}
       UNION ALL
       SELECT 'g', c.id, NULL, array_to_string(c.mailboxes, ' ')
         FROM credentials c WHERE c.id = ANY($5::text[]) AND c.issuer IS NOT NULL`,
      [mailboxes.all, mailboxes.all ? [] : mailboxes.ids, requestIds, resultWaitIds, tokenIds, owner ?? null],
    );
    const heads: MailboxHead[] = [];
    const states = new Map<string, RequestState>();
    const deliveries = new Map<string, DeliveryStatus>();
    let ownedWaits = 0;
    const resolvedWaits: string[] = [];
    const lapsedTokens = new Map<string, AccessEndReason>();
    const principalMailboxes = new Map<string, string[]>();
    for (const r of rows) {
      if (r.kind === 'm') heads.push({ mailboxId: r.id, cursorKey: r.cursor_key!, seq: Number(r.value) });
      else if (r.kind === 'r') states.set(r.id, r.value as RequestState);
      else if (r.kind === 'd') deliveries.set(r.id, r.value as DeliveryStatus);
      else if (r.kind === 'p') ownedWaits = Number(r.value);
      else if (r.kind === 'x') resolvedWaits.push(r.id);
      else if (r.kind === 't') lapsedTokens.set(r.id, r.value as AccessEndReason);
      else principalMailboxes.set(r.id, r.value ? r.value.split(' ') : []);
    }
    return { heads, states, deliveries, ownedWaits, resolvedWaits, lapsedTokens, principalMailboxes };
  }
}
