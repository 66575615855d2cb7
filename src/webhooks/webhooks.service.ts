import { AppConfig } from '../config/app-config';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { AuditLog } from '../audit/audit-log';
import { newId } from '../common/ids';
import { EventLog } from '../events/event-log';
import { Caller } from '../kernel/caller';
import { invalidRequest, notFound } from '../kernel/errors';
import { MailboxService } from '../mail/mailbox.service';
import { SecretBox } from '../secrets/secret-box';
import { CreateWebhookDto, ReplayWebhookDto, UpdateWebhookDto } from './dto/webhook.dto';
import { WebhookDeliveryRepository } from './webhook-delivery.repository';
import { EndpointChanges, WebhookEndpointRepository } from './webhook-endpoint.repository';
import { newWebhookEndpoint, WebhookEndpointEntity } from './webhook-endpoint.entity';
import { isWebhookEventType, newWebhookSecret, WEBHOOK_EVENT_TYPES } from './webhook-events';
import { assertWebhookUrl } from './webhook-http';
import { deliveryView, webhookView } from './webhook.views';

/** How long a rotated-out secret still signs (docs/webhooks.md, "Signatures"). */
export const PREVIOUS_SECRET_VALID_MS = 24 * 3600_000;
/** Deliveries listed by default, and at most. */
const DEFAULT_DELIVERIES = 50;

/**
 * Webhook endpoints (docs/webhooks.md): managed by `admin` or `webhooks:manage` tokens, each within
 * its own mailboxes; another tenant's endpoint answers as unknown. Every change is audited; secrets
 * are shown once and stored sealed.
 */
@Injectable()
export class WebhooksService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly endpoints: WebhookEndpointRepository,
    private readonly deliveries: WebhookDeliveryRepository,
    private readonly mailboxes: MailboxService,
    private readonly box: SecretBox,
    private readonly audit: AuditLog,
    private readonly events: EventLog,
    private readonly config: AppConfig,
  ) {}

  async create(caller: Caller, body: CreateWebhookDto) {
    if (!this.box.available) {
      throw invalidRequest(
        'secrets_key_missing',
        'This server has no ALCARTA_SECRETS_KEY, which encrypts the signing secrets of webhooks; an operator must set one first.',
      );
    }
    assertWebhookUrl(body.url, this.config.webhookAllowedHosts);
    checkEvents(body.events);
    const mailboxIds = await this.reachableMailboxes(caller, body.mailbox_ids);
    const secret = newWebhookSecret();
    const endpoint = newWebhookEndpoint({
      id: newId('whk'),
      url: body.url,
      events: [...new Set(body.events)],
      mailboxIds,
      description: body.description ?? null,
      secretSealed: this.box.seal(secret),
      createdBy: caller.tokenId,
    });
    const created = await this.dataSource.transaction(async (manager) => {
      await this.endpoints.insert(manager, endpoint);
      await this.audit.append(manager, {
        action: 'webhook_created',
        actor: caller,
        subject: { webhook_id: endpoint.id, url: endpoint.url, events: endpoint.events, mailbox_ids: mailboxIds },
      });
      return (await this.endpoints.findVisible(endpoint.id, caller.mailboxAccess, manager))!;
    });
    return { ...webhookView(created), secret };
  }

  async list(caller: Caller) {
    const endpoints = await this.endpoints.list(caller.mailboxAccess);
    return { webhooks: endpoints.map(webhookView) };
  }

  async get(caller: Caller, id: string) {
    return webhookView(await this.visible(caller, id));
  }

  async update(caller: Caller, id: string, body: UpdateWebhookDto) {
    if (body.url !== undefined) assertWebhookUrl(body.url, this.config.webhookAllowedHosts);
    if (body.events !== undefined) checkEvents(body.events);
    const mailboxIds =
      body.mailbox_ids === undefined ? undefined : await this.reachableMailboxes(caller, body.mailbox_ids);
    return this.dataSource.transaction(async (manager) => {
      const endpoint = await this.visibleForUpdate(manager, caller, id);
      const changes: EndpointChanges = {
        ...(body.url !== undefined && { url: body.url }),
        ...(body.events !== undefined && { events: [...new Set(body.events)] }),
        ...(mailboxIds !== undefined && { mailboxIds }),
        ...(body.description !== undefined && { description: body.description }),
      };
      if (body.enabled === true && !endpoint.enabled) {
        Object.assign(changes, { enabled: true, disabledAt: null, disabledReason: null, failingSince: null });
      } else if (body.enabled === false && endpoint.enabled) {
        Object.assign(changes, { enabled: false, disabledAt: new Date(), disabledReason: 'manual' });
        await this.deliveries.failPending(manager, id, 'the endpoint was disabled');
      }
      await this.endpoints.update(manager, id, changes);
      await this.audit.append(manager, {
        action: 'webhook_updated',
        actor: caller,
        subject: { webhook_id: id, ...body },
      });
      return webhookView((await this.endpoints.findVisible(id, caller.mailboxAccess, manager))!);
    });
  }

  async delete(caller: Caller, id: string): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      const endpoint = await this.visibleForUpdate(manager, caller, id);
      await this.endpoints.delete(manager, id);
      await this.audit.append(manager, {
        action: 'webhook_deleted',
        actor: caller,
        subject: { webhook_id: id, url: endpoint.url },
      });
    });
  }

  /** A new secret, shown once; the current one keeps signing (as well) for 24 h. */
  async rotateSecret(caller: Caller, id: string) {
    const secret = newWebhookSecret();
    return this.dataSource.transaction(async (manager) => {
      const endpoint = await this.visibleForUpdate(manager, caller, id);
      const expiresAt = new Date(Date.now() + PREVIOUS_SECRET_VALID_MS);
      await this.endpoints.update(manager, id, {
        secretSealed: this.box.seal(secret),
        previousSecretSealed: endpoint.secretSealed,
        previousSecretExpiresAt: expiresAt,
      });
      await this.audit.append(manager, {
        action: 'webhook_secret_rotated',
        actor: caller,
        subject: { webhook_id: id, previous_secret_expires_at: expiresAt.toISOString() },
      });
      const rotated = (await this.endpoints.findVisible(id, caller.mailboxAccess, manager))!;
      return { ...webhookView(rotated), secret };
    });
  }

  /**
   * New deliveries of the endpoint's events after `since_cursor` that the event log still keeps
   * (docs/webhooks.md, "Replay"); a disabled endpoint gets them once enabled again.
   */
  async replay(caller: Caller, id: string, body: ReplayWebhookDto) {
    return this.dataSource.transaction(async (manager) => {
      await this.visibleForUpdate(manager, caller, id);
      const queued = await this.deliveries.queueReplay(manager, id, body.since_cursor);
      if (queued > 0) await this.events.ringDoorbell(manager, { kind: 'webhooks' });
      return { webhook_id: id, since_cursor: body.since_cursor, queued };
    });
  }

  async listDeliveries(caller: Caller, id: string, limit: number | undefined) {
    await this.visible(caller, id);
    const rows = await this.deliveries.listWithAttempts(id, limit ?? DEFAULT_DELIVERIES);
    return { deliveries: rows.map((r) => deliveryView(r.delivery, r.attempts)) };
  }

  private async visible(caller: Caller, id: string): Promise<WebhookEndpointEntity> {
    const endpoint = await this.endpoints.findVisible(id, caller.mailboxAccess);
    if (!endpoint) throw notFound('webhook', id);
    return endpoint;
  }

  private async visibleForUpdate(manager: EntityManager, caller: Caller, id: string): Promise<WebhookEndpointEntity> {
    const endpoint = await this.endpoints.findVisible(id, caller.mailboxAccess, manager);
    if (!endpoint) throw notFound('webhook', id);
    return endpoint;
  }

  /**
   * `["*"]` (a caller of every mailbox only) or existing mailboxes within the caller's own. Reach
   * is checked before existence, and both answer `mailbox_not_found`, as other mailbox-bound
   * routes do: another tenant's mailboxes cannot be probed.
   */
  private async reachableMailboxes(caller: Caller, requested: readonly string[]): Promise<string[]> {
    const ids = [...new Set(requested)];
    if (ids.includes('*') && ids.length > 1) {
      throw invalidRequest('invalid_mailboxes', 'mailbox_ids is either ["*"] or a list of mailbox ids.', {
        field: 'mailbox_ids',
      });
    }
    const outOfReach = ids.find((m) => (m === '*' ? !caller.mailboxAccess.all : !caller.canSeeMailbox(m)));
    if (outOfReach !== undefined) throw notFound('mailbox', outOfReach);
    if (ids[0] === '*') return ids;
    const [unknown] = await this.mailboxes.unknownIds(ids);
    if (unknown !== undefined) throw notFound('mailbox', unknown);
    return ids;
  }
}

function checkEvents(events: readonly string[]): void {
  const unknown = events.filter((e) => !isWebhookEventType(e));
  if (unknown.length > 0) {
    throw invalidRequest(
      'unknown_event_type',
      `events has unknown types (${unknown.join(', ')}); known types: ${WEBHOOK_EVENT_TYPES.join(', ')}.`,
      { field: 'events', event_types: unknown },
    );
  }
}
