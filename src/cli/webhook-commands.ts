import { INestApplicationContext } from '@nestjs/common';
import { OPERATOR } from '../kernel/caller';
import { WebhooksService } from '../webhooks/webhooks.service';
import { WriteCommand } from './command-line';
import { CommandOutput } from './output';

type WebhookCommand = Extract<WriteCommand, { name: `webhooks ${string}` }>;

/**
 * `webhooks …` (docs/webhooks.md): the REST API's WebhooksService as the operator, so the CLI
 * refuses what REST refuses (an ftp: URL, an unknown event type) with the same reason. The listings
 * run here too, not in read-commands.ts: an endpoint's view needs its entity (the secret's expiry).
 */
export async function runWebhookCommand(app: INestApplicationContext, command: WebhookCommand): Promise<CommandOutput> {
  const webhooks = app.get(WebhooksService);
  switch (command.name) {
    case 'webhooks create': {
      const created = await webhooks.create(OPERATOR, {
        url: command.url,
        events: command.events,
        mailbox_ids: command.mailboxes,
        ...(command.description !== null && { description: command.description }),
      });
      return {
        json: created,
        text: withSecret(created, 'The secret is shown only now; `webhooks rotate-secret` makes a new one.'),
      };
    }
    case 'webhooks list': {
      const listed = await webhooks.list(OPERATOR);
      return { json: listed, text: listed.webhooks.map(webhookLine).join('\n') };
    }
    case 'webhooks update': {
      const updated = await webhooks.update(OPERATOR, command.webhookId, command.changes);
      return { json: updated, text: webhookLine(updated) };
    }
    case 'webhooks replay': {
      const replayed = await webhooks.replay(OPERATOR, command.webhookId, { since_cursor: command.sinceCursor });
      return {
        json: replayed,
        text: `queued ${replayed.queued} ${replayed.queued === 1 ? 'delivery' : 'deliveries'} to ${replayed.webhook_id}: the events after cursor ${replayed.since_cursor}`,
      };
    }
    case 'webhooks delete':
      await webhooks.delete(OPERATOR, command.webhookId);
      return { json: { webhook_id: command.webhookId, deleted: true }, text: `deleted ${command.webhookId}` };
    case 'webhooks rotate-secret': {
      const rotated = await webhooks.rotateSecret(OPERATOR, command.webhookId);
      return {
        json: rotated,
        text: withSecret(
          rotated,
          `The secret is shown only now; the previous one signs as well until ${rotated.previous_secret_expires_at}.`,
        ),
      };
    }
    case 'webhooks deliveries': {
      const listed = await webhooks.listDeliveries(OPERATOR, command.webhookId, undefined);
      return { json: listed, text: listed.deliveries.map(deliveryLine).join('\n') };
    }
  }
}

type WebhookView = Awaited<ReturnType<WebhooksService['get']>>;
type DeliveryView = Awaited<ReturnType<WebhooksService['listDeliveries']>>['deliveries'][number];

function withSecret(w: WebhookView & { secret: string }, note: string): string {
  return [
    `webhook_id:  ${w.webhook_id}`,
    `secret:      ${w.secret}`,
    `url:         ${w.url}`,
    `events:      ${w.events.join(',')}`,
    `mailboxes:   ${w.mailbox_ids.join(',')}`,
    note,
  ].join('\n');
}

function webhookLine(w: WebhookView): string {
  return [
    w.webhook_id,
    w.url,
    `events=${w.events.join(',')}`,
    `mailboxes=${w.mailbox_ids.join(',')}`,
    ...(w.description ? [JSON.stringify(w.description)] : []),
    ...(w.enabled ? [] : [`DISABLED (${w.disabled_reason})`]),
  ].join('  ');
}

function deliveryLine(d: DeliveryView): string {
  return [
    d.delivery_id,
    d.event_type,
    `cursor=${d.cursor}`,
    d.status,
    `attempts=${d.attempts.length}`,
    ...(d.last_error ? [`last_error=${JSON.stringify(d.last_error)}`] : []),
    `created=${d.created_at}`,
  ].join('  ');
}
