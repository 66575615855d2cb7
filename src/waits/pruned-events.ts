import { RequestState } from '../approvals/approval-request.entity';
import { DeliveryEventPayload, RequestEventPayload } from '../events/event-log';
import { DeliveryStatus } from '../outbox/outbound-delivery.entity';

/**
 * A request wait shows each request's latest event. Housekeeping deletes events after
 * ALCARTA_EVENT_RETENTION_DAYS while the request stays, so when the event is gone these rebuild it
 * from the rows the event described. A request changes state once (pending → a final state), so
 * its latest transition follows from the request row exactly.
 */
export function latestRequestEvent(
  stored: RequestEventPayload | null,
  request: { id: string; state: RequestState; createdAt: Date; decidedAt: Date | null },
): RequestEventPayload {
  if (stored) return stored;
  const pending = request.state === 'pending';
  return {
    type: 'request_state_changed',
    request_id: request.id,
    state: request.state,
    previous_state: pending ? null : 'pending',
    changed_at: (pending ? request.createdAt : (request.decidedAt ?? request.createdAt)).toISOString(),
  };
}

/**
 * The latest status change of a request's delivery; rebuilt from the delivery row when the event
 * is gone. Every status change sets the row's `updated_at` to the event's time (only the takeover
 * of a lapsed `sending` claim moves it without an event, and no claim lasts the retention).
 */
export function latestDeliveryEvent(
  stored: DeliveryEventPayload | null,
  delivery: { mailboxId: string; messageId: string; requestId: string; status: DeliveryStatus; updatedAt: Date },
): DeliveryEventPayload {
  return (
    stored ?? {
      type: 'message_delivery_changed',
      mailbox_id: delivery.mailboxId,
      message_id: delivery.messageId,
      request_id: delivery.requestId,
      status: delivery.status,
      changed_at: delivery.updatedAt.toISOString(),
    }
  );
}
