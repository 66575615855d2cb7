import type { ParameterObject, ReferenceObject, RequestBodyObject, SchemaObject } from '@nestjs/swagger';

/** What the OpenAPI document says about one operation beyond what the route and its DTOs show. */
export interface OperationText {
  summary: string;
  description?: string;
  /** The success answer: its status, and its JSON schema (none: an empty answer). */
  success: { status: number; description: string; schema?: SchemaObject | ReferenceObject; contentType?: string };
  /**
   * Error answers this operation gives besides those of every protected route (401, 403, 429, 503):
   * a description (the body is an Error), or a description and the schema of another body.
   */
  errors?: Record<number, string | { description: string; schema: string }>;
  /** A request body the route reads itself (not through a DTO parameter). */
  requestBody?: RequestBodyObject;
  /** Parameters the route reads itself. */
  parameters?: ParameterObject[];
}

const ref = (name: string): ReferenceObject => ({ $ref: `#/components/schemas/${name}` });
const json = (status: number, description: string, schema: string) => ({
  status,
  description,
  schema: ref(schema),
});
const noContent = (description: string) => ({ status: 204, description });

/**
 * Keyed by operation id (`<controller without "Controller">_<method>`). Every documented route
 * needs an entry, and every entry a route: building the document fails otherwise, so a new route
 * cannot ship undocumented.
 */
export const REST_OPERATIONS: Record<string, OperationText> = {
  Mailboxes_create: {
    summary: 'Create a mailbox',
    description:
      'Needs an admin token bound to every mailbox (`*`). The address is stored lower-case. With `source`, the ' +
      'mailbox is backed by an existing IMAP account (docs/connected-mailboxes.md), checked by signing in ' +
      'before anything is stored.',
    success: json(201, 'The mailbox.', 'Mailbox'),
    errors: {
      400: 'The body is invalid, or the account could not be used (reason source_unreachable, source_tls_failed, source_auth_failed, source_folder_missing, source_smtp_failed, secrets_key_missing).',
      409: 'A mailbox with this address exists.',
    },
  },
  Mailboxes_list: {
    summary: 'List the mailboxes the token reaches',
    success: json(200, 'The mailboxes.', 'MailboxList'),
  },
  Mailboxes_get: {
    summary: 'Get a mailbox, with the state of its connected account',
    success: json(200, 'The mailbox.', 'Mailbox'),
    errors: { 404: 'No such mailbox is visible to this token.' },
  },
  Mailboxes_update: {
    summary: 'Rename a mailbox, or connect, change, pause or disconnect its account',
    description:
      '`source` is merged onto the stored one at its first level (`auth` is replaced whole, or kept when ' +
      'absent); `{"paused": true}` pauses syncing; `null` disconnects the account (its messages stay). New ' +
      'connection settings are checked by signing in first: nothing is stored when that fails. ' +
      'See docs/connected-mailboxes.md.',
    success: json(200, 'The mailbox.', 'Mailbox'),
    errors: {
      400: 'The body is invalid, or the account could not be used (reason source_unreachable, source_tls_failed, source_auth_failed, source_folder_missing, source_smtp_failed, secrets_key_missing).',
      404: 'No such mailbox is visible to this token.',
    },
  },
  MailboxSource_test: {
    summary: "Sign in to the mailbox's connected account; changes nothing",
    success: json(200, 'What the check found: ok, or the stage that failed and why.', 'SourceTestResult'),
    errors: {
      400: 'The mailbox has no connected account (no_source).',
      404: 'No such mailbox is visible to this token.',
    },
  },
  MessageIngest_ingest: {
    summary: 'Deliver an inbound message to a mailbox',
    description:
      'As JSON, or as a raw RFC 5322 message (`Content-Type: message/rfc822`, whose DKIM, DMARC and ARC ' +
      'are checked). A message whose Message-ID the mailbox already has is not stored again.',
    success: json(201, 'The stored message, or the one it duplicates.', 'IngestResult'),
    errors: {
      400: 'The body is invalid or of another content type.',
      404: 'No such mailbox is visible to this token.',
      413: 'The message is larger than ALCARTA_MAX_INGEST_BYTES.',
    },
    requestBody: {
      required: true,
      content: {
        'application/json': { schema: ref('IngestMessageDto') },
        'message/rfc822': { schema: { type: 'string', format: 'binary' } },
      },
    },
  },
  Outbox_list: {
    summary: 'List outbound deliveries',
    description: 'Newest first, at most `limit` (default 100).',
    success: json(200, 'The deliveries.', 'OutboxList'),
    errors: { 400: 'A query parameter is invalid.' },
  },
  Outbox_retry: {
    summary: 'Send a failed message again',
    success: json(200, 'The delivery, queued again.', 'OutboxEntry'),
    errors: {
      404: 'No such outbound message is visible to this token.',
      409: 'The delivery has not failed, or no relay is configured.',
    },
  },
  Requests_list: {
    summary: 'List approval requests',
    description: 'Newest first, at most `limit` (default 100).',
    success: json(200, 'The requests.', 'RequestList'),
    errors: { 400: 'A query parameter is invalid.' },
  },
  Requests_approve: {
    summary: 'Approve a pending request',
    description:
      'An approved `send_email` request queues its email. With `content_sha256`, the decision applies only ' +
      'to that content. A person may not decide a request they made (403).',
    success: json(200, 'The request after the decision.', 'Request'),
    errors: {
      400: 'The body is invalid.',
      403: 'The caller made the request (self_approval), or the policy does not list it (not_an_approver).',
      404: 'No such request is visible to this token.',
      409:
        'The request is no longer pending (request_not_pending), its content differs from content_sha256, or ' +
        'this approver already approved it (already_approved).',
    },
  },
  Requests_reject: {
    summary: 'Reject a pending request',
    success: json(200, 'The request after the decision.', 'Request'),
    errors: {
      400: 'The body is invalid.',
      403: 'The caller made the request (self_approval), or the policy does not list it (not_an_approver).',
      404: 'No such request is visible to this token.',
      409: 'The request is no longer pending (request_not_pending), or its content differs from content_sha256.',
    },
  },
  Tokens_create: {
    summary: 'Create a token',
    description: 'The answer is the only place the secret appears.',
    success: json(201, 'The token and its secret.', 'CreatedToken'),
    errors: { 400: 'The body is invalid.' },
  },
  Audit_list: {
    summary: 'Read the audit trail',
    description:
      "Entries after the cursor `since` (an entry's `seq`; 0, the default, from the start), at most `limit` " +
      '(1-1000, default 100), one JSON object a line, oldest first. The `Alcarta-Audit-Cursor` header names the ' +
      'cursor for the next page. Needs an admin token bound to every mailbox (`*`). The entry format and the ' +
      'hash chain are described in docs/audit.md.',
    parameters: [
      {
        name: 'since',
        in: 'query',
        required: false,
        schema: { type: 'integer', minimum: 0 },
        description: 'The cursor.',
      },
      {
        name: 'limit',
        in: 'query',
        required: false,
        schema: { type: 'integer', minimum: 1, maximum: 1000 },
        description: 'Entries at most.',
      },
    ],
    success: {
      status: 200,
      description: 'The entries as NDJSON.',
      contentType: 'application/x-ndjson',
      schema: { type: 'string' },
    },
    errors: { 400: 'A query parameter is invalid (reason invalid_cursor, invalid_limit).' },
  },
  Tokens_list: {
    summary: 'List tokens',
    success: json(200, 'The tokens (never their secrets).', 'TokenList'),
  },
  Tokens_revoke: {
    summary: 'Revoke a token',
    description:
      'Takes effect on the next request, and within a second on every replica ends what the token holds: ' +
      'parked waits, websockets, working tasks, SMTP sessions.',
    success: noContent('Revoked.'),
    errors: { 404: 'No such token is visible to this token.' },
  },
  Grants_create: {
    summary: 'Grant mailboxes to an OAuth principal',
    success: json(201, 'The grant.', 'Grant'),
    errors: { 400: 'The body is invalid.' },
  },
  Grants_list: {
    summary: 'List grants',
    success: json(200, 'The grants.', 'GrantList'),
  },
  Grants_revoke: {
    summary: 'Delete a grant',
    success: noContent('Deleted.'),
    errors: { 404: 'No such grant is visible to this token.' },
  },
  MailboxPolicy_get: {
    summary: "Read a mailbox's approval policy",
    description: 'A mailbox without a policy shows the defaults (anyone may decide, quorum 1) and `updated_at` null.',
    success: json(200, 'The policy.', 'Policy'),
    errors: { 404: 'No such mailbox is visible to this token.' },
  },
  MailboxPolicy_put: {
    summary: "Replace a mailbox's approval policy",
    description:
      'Approvers, quorum, default expiry, escalation and recipient rules, as a whole: a field left out takes ' +
      'its default. Applies to decisions from now on; pending requests keep their quorum and escalation time.',
    success: json(200, 'The policy now.', 'Policy'),
    errors: {
      400: 'The body is invalid (invalid_policy names the field).',
      404: 'No such mailbox is visible to this token.',
    },
  },
  Approvers_get: {
    summary: "List a mailbox's approvers",
    description: 'The addresses that get approval mail for requests of the mailbox.',
    success: json(200, 'The approvers.', 'Approvers'),
    errors: { 404: 'No such mailbox is visible to this token.' },
  },
  Approvers_replace: {
    summary: "Replace a mailbox's approvers",
    success: json(200, 'The approvers now.', 'Approvers'),
    errors: { 400: 'The body is invalid.', 404: 'No such mailbox is visible to this token.' },
  },
  Webhooks_create: {
    summary: 'Create a webhook endpoint',
    description:
      'The events of the given types in the given mailboxes are POSTed to `url`, signed as Standard Webhooks ' +
      'says (docs/webhooks.md). The secret is shown only in this answer. `webhooks:manage` or `admin`, within ' +
      "the token's mailboxes.",
    success: json(201, 'The endpoint, with its secret.', 'WebhookWithSecret'),
    errors: {
      400: 'The body is invalid (reason invalid_url, unknown_event_type, invalid_mailboxes, invalid_field, secrets_key_missing).',
      404: 'A mailbox is not visible to this token (reason mailbox_not_found).',
    },
  },
  Webhooks_list: {
    summary: 'List webhook endpoints',
    description: 'A token bound to mailboxes sees the endpoints whose mailboxes are all within its own.',
    success: json(200, 'The endpoints.', 'WebhookList'),
  },
  Webhooks_get: {
    summary: 'Get a webhook endpoint',
    success: json(200, 'The endpoint.', 'Webhook'),
    errors: { 404: 'No such endpoint is visible to this token.' },
  },
  Webhooks_update: {
    summary: 'Change a webhook endpoint, or disable or enable it',
    description: 'Disabling fails what it had queued; enabling starts its failure streak over.',
    success: json(200, 'The endpoint now.', 'Webhook'),
    errors: {
      400: 'The body is invalid (reason invalid_url, unknown_event_type, invalid_mailboxes, invalid_field).',
      404: 'No such endpoint, or a mailbox, is visible to this token.',
    },
  },
  Webhooks_delete: {
    summary: 'Delete a webhook endpoint',
    success: noContent('Deleted, with its deliveries.'),
    errors: { 404: 'No such endpoint is visible to this token.' },
  },
  Webhooks_rotateSecret: {
    summary: "Rotate a webhook endpoint's secret",
    description: 'The new secret is shown only in this answer; the previous one keeps signing too for 24 h.',
    success: json(200, 'The endpoint, with its new secret.', 'WebhookWithSecret'),
    errors: { 404: 'No such endpoint is visible to this token.' },
  },
  Webhooks_replay: {
    summary: 'Deliver the events after a cursor again',
    description:
      "New deliveries (new webhook-ids) of the endpoint's events after `since_cursor` that the event log " +
      'still keeps.',
    success: json(200, 'How many deliveries were queued.', 'WebhookReplay'),
    errors: { 400: 'since_cursor is not a cursor.', 404: 'No such endpoint is visible to this token.' },
  },
  Webhooks_deliveries: {
    summary: "List a webhook endpoint's deliveries, with each attempt",
    description: 'Newest first.',
    success: json(200, 'The deliveries.', 'WebhookDeliveryList'),
    errors: { 404: 'No such endpoint is visible to this token.' },
  },
  WaitSocket_upgradeRequired: {
    summary: 'The websocket of a wait',
    description:
      'A `websocket_url` of a wait points here. Open it as a websocket: it sends `{"type":"ready"}`, then one ' +
      '`{"type":"result",…}`. A plain HTTP request (a proxy dropped the Upgrade headers) answers 400 ' +
      '`upgrade_required` and leaves the ticket unused.',
    parameters: [
      {
        name: 'ticket',
        in: 'query',
        required: true,
        schema: { type: 'string' },
        description: 'The single-use ticket.',
      },
    ],
    success: { status: 101, description: 'Switching to the websocket protocol.' },
    errors: { 400: 'Not a websocket upgrade (reason upgrade_required).' },
  },
  Health_live: {
    summary: 'Liveness',
    description: 'The process is up and serving HTTP; nothing external is checked.',
    success: json(200, 'Alive.', 'HealthReport'),
  },
  Health_ready: {
    summary: 'Readiness',
    description: 'The database answers, the doorbell listener is connected, and the replica is not draining.',
    success: json(200, 'Ready.', 'HealthReport'),
    errors: { 503: { description: 'Not ready: the report names the failing check.', schema: 'HealthReport' } },
  },
  Metrics_render: {
    summary: 'Prometheus metrics',
    success: {
      status: 200,
      description: 'The metrics in the Prometheus text format.',
      contentType: 'text/plain',
      schema: { type: 'string' },
    },
  },
};
