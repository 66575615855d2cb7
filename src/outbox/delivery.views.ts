import { DeliveryStatus, OutboundDeliveryEntity } from './outbound-delivery.entity';

/** The `delivery` object of SPEC 9, on requests and outbound messages; absent fields are left out. */
export interface DeliveryView {
  status: DeliveryStatus;
  attempts: number;
  last_attempt_at?: string;
  next_attempt_at?: string;
  response?: string;
  error?: string;
}

/** The columns the view shows (the wait engine reads them with its own SQL). */
export type DeliveryFields = Pick<
  OutboundDeliveryEntity,
  'status' | 'attempts' | 'lastAttemptAt' | 'nextAttemptAt' | 'response' | 'error'
>;

export function deliveryView(d: DeliveryFields): DeliveryView {
  return {
    status: d.status,
    attempts: d.attempts,
    ...(d.lastAttemptAt !== null && { last_attempt_at: d.lastAttemptAt.toISOString() }),
    ...(d.nextAttemptAt !== null && { next_attempt_at: d.nextAttemptAt.toISOString() }),
    ...(d.response !== null && { response: d.response }),
    ...(d.error !== null && { error: d.error }),
  };
}
