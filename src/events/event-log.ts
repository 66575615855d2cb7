import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity';
import { Doorbell, DOORBELL_CHANNEL, encodeDoorbell } from './doorbell';
import { EventEntity, EventType } from './event.entity';

export interface MessageEventPayload {
  type: 'message_received' | 'message_sent';
  mailbox_id: string;
  message_id: string;
  from: string;
  subject: string;
  received_at: string;
  /** Inbound mail only (docs/mail.md). */
  authentication?: { spf: string; dkim: string; dmarc: string; arc: string };
  from_verified?: boolean;
}

/** A change of an outbound message's delivery status (docs/mail.md). */
export interface DeliveryEventPayload {
  type: 'message_delivery_changed';
  mailbox_id: string;
  message_id: string;
  request_id: string | null;
  status: string;
  changed_at: string;
}

/** A change of the state of a mailbox's connected account (docs/connected-mailboxes.md). */
export interface SourceEventPayload {
  type: 'mailbox_source_changed';
  mailbox_id: string;
  state: string;
  previous_state: string | null;
  last_error: string | null;
  changed_at: string;
}

export interface RequestEventPayload {
  type: 'request_state_changed';
  request_id: string;
  state: string;
  previous_state: string | null;
  changed_at: string;
}

/**
 * A new approval request, to announce it where its approvers are (webhooks, `approval.requested` of
 * the Events extension). Written beside the request's first `request_state_changed` (null → pending),
 * which waits and the decision feed keep reading; small and without secrets: no draft bodies.
 */
export interface RequestCreatedEventPayload {
  type: 'request_created';
  request_id: string;
  mailbox_id: string;
  kind: 'approval' | 'send_email';
  title: string;
  created_at: string;
  expires_at: string;
  /** send_email only: the draft's recipients and subject. */
  to?: string[];
  cc?: string[];
  subject?: string;
}

/** A pending request that nobody decided by its policy's escalation time (docs/policies.md). */
export interface EscalationEventPayload {
  type: 'request_escalated';
  request_id: string;
  mailbox_id: string;
  escalated_at: string;
  escalate_to: string[];
}

/** A webhook endpoint was disabled (docs/webhooks.md): it answered 410, or failed for 3 days. */
export interface WebhookDisabledEventPayload {
  type: 'webhook_disabled';
  webhook_id: string;
  mailbox_ids: string[];
  reason: 'gone' | 'failing';
  disabled_at: string;
}

/** An event just written, as the hooks of EventLog.onAppended see it. */
export interface AppendedEvent {
  id: string;
  type: EventType;
  mailboxId: string | null;
  payload: Record<string, unknown>;
}

/** Runs in the transaction that wrote the event, so what it writes commits (or not) with it. */
export type AppendHook = (manager: EntityManager, event: AppendedEvent) => Promise<void>;

/**
 * The append-only event log. Callers append inside the transaction that makes the change, so an
 * event exists exactly when its change committed, and the doorbell rings on the same commit.
 */
@Injectable()
export class EventLog {
  private readonly hooks: AppendHook[] = [];

  /**
   * Registers a hook that every appended event goes through, in its transaction (the webhooks
   * module queues its deliveries so), without this module knowing who listens.
   */
  onAppended(hook: AppendHook): void {
    this.hooks.push(hook);
  }

  /**
   * `ring: false` leaves the mailbox's doorbell to the caller, who rings it once for several events of
   * one transaction (a group commit of inbound mail): one ring wakes the mailbox's waits for all.
   */
  async appendMessageEvent(manager: EntityManager, payload: MessageEventPayload, ring = true): Promise<void> {
    await this.insert(manager, {
      type: payload.type,
      mailboxId: payload.mailbox_id,
      messageId: payload.message_id,
      requestId: null,
      payload: { ...payload },
    });
    if (ring) await this.ring(manager, encodeDoorbell({ kind: 'message', mailboxId: payload.mailbox_id }));
  }

  async appendRequestEvent(manager: EntityManager, mailboxId: string, payload: RequestEventPayload): Promise<void> {
    await this.insert(manager, {
      type: payload.type,
      mailboxId,
      messageId: null,
      requestId: payload.request_id,
      payload: { ...payload },
    });
    await this.ring(manager, encodeDoorbell({ kind: 'request', mailboxId, requestId: payload.request_id }));
  }

  /**
   * Rings nothing: request waits wake on state changes only, and the request's first state change
   * (to pending) is appended in the same transaction and rings.
   */
  async appendRequestCreatedEvent(manager: EntityManager, payload: RequestCreatedEventPayload): Promise<void> {
    await this.insert(manager, {
      type: payload.type,
      mailboxId: payload.mailbox_id,
      messageId: null,
      requestId: payload.request_id,
      payload: { ...payload },
    });
  }

  /**
   * Rings the request's doorbell when the delivery belongs to one, so request waits that ask for
   * `delivery_states` re-read it.
   */
  async appendDeliveryEvent(manager: EntityManager, payload: DeliveryEventPayload): Promise<void> {
    await this.insert(manager, {
      type: payload.type,
      mailboxId: payload.mailbox_id,
      messageId: payload.message_id,
      requestId: payload.request_id,
      payload: { ...payload },
    });
    if (payload.request_id) {
      await this.ring(
        manager,
        encodeDoorbell({ kind: 'request', mailboxId: payload.mailbox_id, requestId: payload.request_id }),
      );
    }
  }

  /**
   * Rings nothing: an escalation changes no state, and request waits wake only when the state (or
   * its delivery) changes; waits and the decision feed read `request_state_changed` events only.
   */
  async appendEscalationEvent(manager: EntityManager, payload: EscalationEventPayload): Promise<void> {
    await this.insert(manager, {
      type: payload.type,
      mailboxId: payload.mailbox_id,
      messageId: null,
      requestId: payload.request_id,
      payload: { ...payload },
    });
  }

  /** Rings nothing: no wait waits for a source's state. */
  async appendSourceEvent(manager: EntityManager, payload: SourceEventPayload): Promise<void> {
    await this.insert(manager, {
      type: payload.type,
      mailboxId: payload.mailbox_id,
      messageId: null,
      requestId: null,
      payload: { ...payload },
    });
  }

  /** Rings nothing: the webhooks module tells whom it concerns. */
  async appendWebhookDisabledEvent(manager: EntityManager, payload: WebhookDisabledEventPayload): Promise<void> {
    // An endpoint of one mailbox is about that mailbox; one of several, or of all, about none.
    const mailboxId =
      payload.mailbox_ids.length === 1 && payload.mailbox_ids[0] !== '*' ? payload.mailbox_ids[0] : null;
    await this.insert(manager, {
      type: payload.type,
      mailboxId,
      messageId: null,
      requestId: null,
      payload: { ...payload },
    });
  }

  private async insert(manager: EntityManager, row: Omit<EventEntity, 'id' | 'createdAt'>): Promise<void> {
    const result = await manager.insert(EventEntity, row as QueryDeepPartialEntity<EventEntity>);
    if (this.hooks.length === 0) return;
    const event: AppendedEvent = {
      id: String(result.identifiers[0].id),
      type: row.type,
      mailboxId: row.mailboxId,
      payload: row.payload,
    };
    for (const hook of this.hooks) await hook(manager, event);
  }

  /** Rings a doorbell that is not tied to an event (persisted waits), inside the caller's transaction. */
  async ringDoorbell(manager: EntityManager, bell: Doorbell): Promise<void> {
    await this.ring(manager, encodeDoorbell(bell));
  }

  /** Rings several such doorbells in one statement (the bells of a batch of resolved waits). */
  async ringDoorbells(manager: EntityManager, bells: readonly Doorbell[]): Promise<void> {
    if (bells.length > 0) await this.ring(manager, ...bells.map(encodeDoorbell));
  }

  /** The database's clock at the end of the transaction rides along, for the wake latency metric. */
  private async ring(manager: EntityManager, ...payloads: string[]): Promise<void> {
    await manager.query(
      `SELECT pg_notify($1, p || ' ' || floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
         FROM unnest($2::text[]) AS p`,
      [DOORBELL_CHANNEL, payloads],
    );
  }
}
