import { createHash } from 'node:crypto';
import { ApprovalRequestEntity, RequestKind } from './approval-request.entity';

/**
 * Everything a person approves: what the request asks for, and for an email exactly what would leave
 * (sender, recipients, subject, both bodies, the message it answers). Nothing else (state, dates,
 * who asked) is part of it, so the hash stays the same while the request waits.
 */
export interface RequestContent {
  kind: RequestKind;
  mailbox_id: string;
  from: string | null;
  to: readonly string[];
  cc: readonly string[];
  subject: string | null;
  text: string | null;
  html: string | null;
  in_reply_to: string | null;
  title: string;
  details: string | null;
}

/** Names the canonical form, so a later form can never produce a colliding hash. */
const CANONICAL_FORM = 'alcarta.request-content.v1';

/**
 * `content_sha256`: SHA-256 (lowercase hex) of the UTF-8 JSON array
 * `["alcarta.request-content.v1", kind, mailbox_id, from, to, cc, subject, text, html, in_reply_to,
 * title, details]`, absent values as null and absent address lists as []. A JSON array of strings
 * has one serialization, so the same content always gives the same hash, and anyone can recompute it.
 */
export function contentSha256(content: RequestContent): string {
  const canonical = JSON.stringify([
    CANONICAL_FORM,
    content.kind,
    content.mailbox_id,
    content.from,
    content.to,
    content.cc,
    content.subject,
    content.text,
    content.html,
    content.in_reply_to,
    content.title,
    content.details,
  ]);
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}

/** The content of a stored request as it stands. */
export function contentOfRequest(
  request: Pick<ApprovalRequestEntity, 'kind' | 'mailboxId' | 'email' | 'title' | 'details'>,
): RequestContent {
  const email = request.email;
  return {
    kind: request.kind,
    mailbox_id: request.mailboxId,
    from: email?.from ?? null,
    to: email?.to ?? [],
    cc: email?.cc ?? [],
    subject: email?.subject ?? null,
    text: email?.text ?? null,
    html: email?.html ?? null,
    in_reply_to: email?.in_reply_to_message_id ?? null,
    title: request.title,
    details: request.details,
  };
}

/** A content hash as a client may send it back: 64 lowercase hex digits. */
export const CONTENT_SHA256_PATTERN = /^[0-9a-f]{64}$/;
