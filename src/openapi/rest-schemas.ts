import type { ReferenceObject, SchemaObject } from '@nestjs/swagger';
import { REQUEST_STATES } from '../approvals/approval-request.entity';
import { SCOPES } from '../kernel/scopes';
import { DELIVERY_STATUSES } from '../outbox/outbound-delivery.entity';
import { WEBHOOK_DELIVERY_STATUSES } from '../webhooks/webhook-delivery.entity';
import { WEBHOOK_EVENT_TYPES } from '../webhooks/webhook-events';

/**
 * The JSON the REST API answers with, as OpenAPI schemas (components.schemas of /openapi.json).
 * The answers are built by the `*.views.ts` functions, whose types TypeScript infers; these schemas
 * say the same in OpenAPI, and the OpenAPI end-to-end test checks real answers against them.
 */
const dateTime: SchemaObject = { type: 'string', format: 'date-time' };
const nullableDateTime: SchemaObject = { ...dateTime, nullable: true };
const strings: SchemaObject = { type: 'array', items: { type: 'string' } };
const ref = (name: string): ReferenceObject => ({ $ref: `#/components/schemas/${name}` });

function object(
  properties: Record<string, SchemaObject | ReferenceObject>,
  optional: readonly string[] = [],
): SchemaObject {
  return {
    type: 'object',
    properties,
    required: Object.keys(properties).filter((key) => !optional.includes(key)),
  };
}

const mailboxIds: SchemaObject = { ...strings, description: 'Mailbox ids (mbx_…), or ["*"] for every mailbox.' };

const WEBHOOK_PROPERTIES: Record<string, SchemaObject | ReferenceObject> = {
  webhook_id: { type: 'string' },
  url: { type: 'string' },
  events: { type: 'array', items: { type: 'string', enum: [...WEBHOOK_EVENT_TYPES] } },
  mailbox_ids: mailboxIds,
  description: { type: 'string', nullable: true },
  enabled: { type: 'boolean' },
  disabled_at: nullableDateTime,
  disabled_reason: {
    type: 'string',
    nullable: true,
    description: 'gone (it answered 410), failing (3 days of failures) or manual (PATCH).',
  },
  failing_since: { ...nullableDateTime, description: 'Since when every attempt failed; null after a success.' },
  previous_secret_expires_at: {
    ...nullableDateTime,
    description: 'Until when the secret before the last rotation still signs too.',
  },
  created_at: dateTime,
  updated_at: dateTime,
};

const DELIVERY_PROPERTIES: Record<string, SchemaObject | ReferenceObject> = {
  status: { type: 'string', enum: [...DELIVERY_STATUSES] },
  attempts: { type: 'integer', minimum: 0 },
  last_attempt_at: dateTime,
  next_attempt_at: dateTime,
  response: { type: 'string', description: "The relay's last answer." },
  error: { type: 'string', description: 'Why the last attempt failed.' },
  reason: {
    type: 'string',
    enum: ['relay_refused', 'retries_exhausted', 'content_changed'],
    description: 'On a failed delivery: why, as a code.',
  },
};
const DELIVERY_OPTIONAL = ['last_attempt_at', 'next_attempt_at', 'response', 'error', 'reason'];

export const REST_SCHEMAS: Record<string, SchemaObject> = {
  Error: {
    ...object(
      {
        error: {
          type: 'string',
          description: 'The kind of error (invalid_request, unauthorized, forbidden, not_found, conflict, …).',
        },
        reason: { type: 'string', description: 'The specific cause, stable for clients to test.' },
        message: { type: 'string', description: 'What went wrong, for people.' },
      },
      ['reason'],
    ),
    description:
      'Every error answer. Some carry more fields: `field` (the body field at fault), `id` (what was not ' +
      'found), `required_scopes`, `retry_after_seconds`.',
    additionalProperties: true,
  },
  Mailbox: object(
    {
      mailbox_id: { type: 'string' },
      address: { type: 'string', format: 'email' },
      name: { type: 'string', nullable: true },
      source: ref('MailboxSource'),
    },
    ['source'],
  ),
  MailboxSource: {
    ...object({
      kind: { type: 'string', enum: ['imap'] },
      host: { type: 'string' },
      port: { type: 'integer' },
      tls: { type: 'string', enum: ['implicit', 'starttls', 'none'] },
      username: { type: 'string' },
      auth: {
        type: 'object',
        description:
          '`{"kind": "password"}`, or `{"kind": "xoauth2", "grant", "token_url", "client_id", "scope"}`: never a secret.',
        additionalProperties: true,
      },
      folders: strings,
      sync_from: { type: 'string', description: '`now`, `all` or an RFC 3339 time.' },
      smtp: {
        type: 'object',
        nullable: true,
        properties: { host: { type: 'string' }, port: { type: 'integer' }, tls: { type: 'string' } },
      },
      save_sent: { type: 'string', nullable: true },
      trusted_authserv_ids: strings,
      paused: { type: 'boolean' },
      state: { type: 'string', enum: ['connecting', 'idle', 'syncing', 'auth_failed', 'unreachable', 'paused'] },
      last_sync_at: nullableDateTime,
      last_error: { type: 'string', nullable: true },
      lag_seconds: { type: 'number', minimum: 0 },
    }),
    description: 'The connected account behind a mailbox, without its secrets, and its state.',
  },
  SourceTestResult: {
    ...object(
      {
        ok: { type: 'boolean' },
        imap: {
          type: 'object',
          properties: {
            folders: {
              type: 'array',
              items: object({ name: { type: 'string' }, messages: { type: 'integer', minimum: 0 } }),
            },
          },
        },
        smtp: object({ ok: { type: 'boolean' } }),
        stage: { type: 'string', enum: ['connect', 'tls', 'auth', 'folder', 'smtp'] },
        reason: { type: 'string' },
        message: { type: 'string' },
      },
      ['imap', 'smtp', 'stage', 'reason', 'message'],
    ),
    description: '`{ok: true, imap, smtp?}`, or `{ok: false, stage, reason, message}`.',
  },
  MailboxList: object({ mailboxes: { type: 'array', items: ref('Mailbox') } }),
  IngestResult: object({
    message_id: { type: 'string' },
    duplicate: {
      type: 'boolean',
      description: 'true: this mailbox already had a message with the same Message-ID; nothing was stored.',
    },
  }),
  Token: object({
    token_id: { type: 'string' },
    name: { type: 'string' },
    scopes: { type: 'array', items: { type: 'string', enum: [...SCOPES] } },
    mailboxes: mailboxIds,
    expires_at: nullableDateTime,
    revoked_at: nullableDateTime,
    created_at: dateTime,
  }),
  TokenList: object({ tokens: { type: 'array', items: ref('Token') } }),
  CreatedToken: {
    ...object({
      token_id: { type: 'string' },
      secret: { type: 'string', description: 'The bearer token (alc_…). Shown only in this answer.' },
      name: { type: 'string' },
      scopes: { type: 'array', items: { type: 'string', enum: [...SCOPES] } },
      mailboxes: mailboxIds,
      expires_at: nullableDateTime,
    }),
  },
  Grant: object({
    grant_id: { type: 'string' },
    principal: { type: 'string', description: 'sub:<subject>, client:<client id> or group:<group name>.' },
    mailboxes: mailboxIds,
    created_at: dateTime,
  }),
  GrantList: object({ grants: { type: 'array', items: ref('Grant') } }),
  Delivery: object(DELIVERY_PROPERTIES, DELIVERY_OPTIONAL),
  EmailDraft: object({
    from: { type: 'string' },
    to: strings,
    cc: strings,
    subject: { type: 'string' },
    text: { type: 'string' },
    html: { type: 'string', nullable: true },
    in_reply_to_message_id: { type: 'string', nullable: true },
  }),
  Request: object(
    {
      request_id: { type: 'string' },
      mailbox_id: { type: 'string' },
      kind: { type: 'string', enum: ['send_email', 'approval'] },
      state: { type: 'string', enum: [...REQUEST_STATES] },
      title: { type: 'string' },
      details: { type: 'string' },
      email: ref('EmailDraft'),
      sanitized: {
        type: 'object',
        description: 'What sanitizing removed from the HTML of an email draft, counted by kind.',
        additionalProperties: { type: 'integer' },
      },
      content_sha256: {
        type: 'string',
        pattern: '^[0-9a-f]{64}$',
        description: 'The hash of what is asked; a decision may carry it back.',
      },
      created_at: dateTime,
      decided_at: dateTime,
      decided_by: { type: 'string' },
      reason: { type: 'string' },
      sent_message_id: { type: 'string' },
      expires_at: dateTime,
      quorum: { type: 'integer', description: 'How many approvers must approve (shown when above 1).' },
      approvals: {
        type: 'array',
        description: 'The approvals so far of a request under quorum.',
        items: object({ by: { type: 'string' }, at: dateTime, reason: { type: 'string', nullable: true } }),
      },
      escalated_at: dateTime,
      delivery: ref('Delivery'),
    },
    [
      'details',
      'email',
      'sanitized',
      'decided_at',
      'decided_by',
      'reason',
      'sent_message_id',
      'quorum',
      'approvals',
      'escalated_at',
      'delivery',
    ],
  ),
  RequestList: object({ requests: { type: 'array', items: ref('Request') } }),
  OutboxEntry: object(
    {
      message_id: { type: 'string' },
      mailbox_id: { type: 'string' },
      request_id: { type: 'string', nullable: true },
      from: { type: 'string', nullable: true },
      to: strings,
      cc: strings,
      subject: { type: 'string', nullable: true },
      queued_at: dateTime,
      updated_at: dateTime,
      ...DELIVERY_PROPERTIES,
    },
    DELIVERY_OPTIONAL,
  ),
  OutboxList: object({ deliveries: { type: 'array', items: ref('OutboxEntry') } }),
  Policy: object({
    mailbox_id: { type: 'string' },
    approvers: {
      ...strings,
      nullable: true,
      description: 'sub:…, client:…, group:…, tok_… or email:<address>; null: anyone who may decide.',
    },
    quorum: { type: 'integer', minimum: 1 },
    expires_after_seconds: { type: 'integer', nullable: true },
    escalate_after_seconds: { type: 'integer', nullable: true },
    escalate_to: strings,
    recipients: object({ allow: strings, block: strings, auto_approve: { type: 'boolean' } }),
    updated_at: nullableDateTime,
  }),
  Approvers: object({ mailbox_id: { type: 'string' }, emails: { ...strings, items: { type: 'string' } } }),
  Webhook: object(WEBHOOK_PROPERTIES),
  WebhookWithSecret: object({
    ...WEBHOOK_PROPERTIES,
    secret: {
      type: 'string',
      description: 'The signing secret (whsec_…), for a Standard Webhooks library. Shown only in this answer.',
    },
  }),
  WebhookList: object({ webhooks: { type: 'array', items: ref('Webhook') } }),
  WebhookReplay: object({
    webhook_id: { type: 'string' },
    since_cursor: { type: 'string' },
    queued: { type: 'integer', minimum: 0, description: 'How many deliveries were queued.' },
  }),
  WebhookDelivery: object({
    delivery_id: { type: 'string', description: 'The webhook-id of every attempt.' },
    event_type: { type: 'string' },
    cursor: { type: 'string', description: "The event's cursor (for replay)." },
    mailbox_id: { type: 'string', nullable: true },
    status: { type: 'string', enum: [...WEBHOOK_DELIVERY_STATUSES] },
    created_at: dateTime,
    delivered_at: nullableDateTime,
    next_attempt_at: nullableDateTime,
    last_error: { type: 'string', nullable: true },
    attempts: {
      type: 'array',
      items: object({
        n: { type: 'integer', minimum: 1 },
        at: dateTime,
        status_code: { type: 'integer', nullable: true },
        error: { type: 'string', nullable: true },
        duration_ms: { type: 'integer', minimum: 0 },
      }),
    },
  }),
  WebhookDeliveryList: object({ deliveries: { type: 'array', items: ref('WebhookDelivery') } }),
  HealthReport: {
    ...object({ status: { type: 'string', enum: ['ok', 'error'] } }),
    description: 'The health check report: `status`, and per check `info`, `error` and `details`.',
    additionalProperties: true,
  },
};
