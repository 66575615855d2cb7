import { DeliveryView } from '../outbox/delivery.views';
import { ApprovalRequestEntity } from './approval-request.entity';

/**
 * A request as `get_request` and the REST API show it; absent optional fields are left out.
 * `delivery` is the outbound delivery of an approved `send_email` request. `content_sha256` is the
 * hash of what is asked (request-content.ts); a decision may carry it back to say what it was about.
 */
export function requestView(r: ApprovalRequestEntity, delivery?: DeliveryView) {
  return {
    request_id: r.id,
    mailbox_id: r.mailboxId,
    kind: r.kind,
    state: r.state,
    title: r.title,
    ...(r.details !== null && { details: r.details }),
    ...(r.email !== null && { email: r.email }),
    ...(r.sanitized !== null && { sanitized: r.sanitized }),
    content_sha256: r.contentSha256,
    created_at: r.createdAt.toISOString(),
    ...(r.decidedAt !== null && { decided_at: r.decidedAt.toISOString() }),
    ...(r.decidedBy !== null && { decided_by: r.decidedBy }),
    ...(r.reason !== null && { reason: r.reason }),
    ...(r.sentMessageId !== null && { sent_message_id: r.sentMessageId }),
    expires_at: r.expiresAt.toISOString(),
    ...quorumView(r),
    ...(r.escalatedAt !== null && { escalated_at: r.escalatedAt.toISOString() }),
    ...(delivery && { delivery }),
  };
}

/**
 * A request made under a quorum above one shows it, and the approvals so far (`approvals:
 * [{by, at, reason}]`); one that needs a single approval shows neither.
 */
function quorumView(r: ApprovalRequestEntity) {
  if (r.quorum <= 1) return {};
  return { quorum: r.quorum, approvals: r.approvals.map(({ by, at, reason }) => ({ by, at, reason })) };
}

/** The answer to `send_email` and `request_approval`; an email's says what sanitizing removed. */
export function createdRequestView(r: ApprovalRequestEntity) {
  return {
    request_id: r.id,
    state: r.state,
    ...(r.decidedBy !== null && { decided_by: r.decidedBy }),
    expires_at: r.expiresAt.toISOString(),
    ...(r.sanitized !== null && { sanitized: r.sanitized }),
  };
}
