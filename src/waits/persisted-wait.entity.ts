import { Check, Column, CreateDateColumn, Entity, Index, PrimaryColumn } from 'typeorm';
import { RequestState } from '../approvals/approval-request.entity';
import { DeliveryStatus } from '../outbox/outbound-delivery.entity';
import { AccessEnded, WaitResult } from './wait-spec';

/** What a persisted wait watches, as stored (the JSON form of a WaitSpec without its caller). */
export type StoredWaitSpec =
  | {
      kind: 'message';
      mailbox_id: string | null;
      from: string | null;
      subject_contains: string | null;
      /** Absent in waits stored before the filter existed (read as false). */
      from_verified?: boolean;
      cursor: string;
    }
  | { kind: 'request'; request_ids: string[]; states: RequestState[]; delivery_states?: DeliveryStatus[] };

@Entity({ name: 'waits' })
@Check('waits_kind_check', `kind IN ('message', 'request')`)
@Check('waits_status_check', `status IN ('pending', 'resolved')`)
/** Partial indexes (pending by deadline and by token, resolved by age), owned by the migrations. */
@Index('waits_pending', { synchronize: false })
@Index('waits_pending_token', { synchronize: false })
@Index('waits_resolved', { synchronize: false })
/** Pending waits by owner, and unowned pending waits (the claim), owned by the migrations too. */
@Index('waits_owner', { synchronize: false })
@Index('waits_unowned', { synchronize: false })
export class PersistedWaitEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  /** The credential that created the wait (a token id, or an OAuth principal's `prn_…`); no other sees it. */
  @Column({ name: 'token_id', type: 'text' })
  tokenId: string;

  @Column({ type: 'text' })
  kind: 'message' | 'request';

  @Column({ type: 'jsonb' })
  spec: StoredWaitSpec;

  @Column({ type: 'text' })
  status: 'pending' | 'resolved';

  /** Fixed once, by whichever replica resolved the wait first (or by the token losing its access). */
  @Column({ type: 'jsonb', nullable: true })
  result: WaitResult | AccessEnded | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  /** End of the watch (creation + timeout_seconds). */
  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  @Column({ name: 'resolved_at', type: 'timestamptz', nullable: true })
  resolvedAt: Date | null;

  /** SHA-256 of the single-use websocket ticket; null when websockets are off. */
  @Column({ name: 'ticket_hash', type: 'character', length: 64, nullable: true, unique: true })
  ticketHash: string | null;

  /**
   * The replica that watches this pending wait (a `wait_owners` id); NULL when none does yet, and
   * once the wait is resolved. Only that replica keeps a watcher for it. Set by the repository, never
   * by whoever builds a new wait (hence optional).
   */
  @Column({ type: 'text', nullable: true })
  owner?: string | null;

  @Column({ name: 'connect_deadline', type: 'timestamptz', nullable: true })
  connectDeadline: Date | null;

  @Column({ name: 'ticket_consumed_at', type: 'timestamptz', nullable: true })
  ticketConsumedAt: Date | null;
}

/** Where a persisted wait stands: pending, or resolved with its fixed result. */
export type WaitOutcome = Pick<PersistedWaitEntity, 'status' | 'result'>;
