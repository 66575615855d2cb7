import { CreateGrantDto } from '../auth/dto/create-grant.dto';
import { CreateTokenDto } from '../auth/dto/create-token.dto';
import { validateBody } from '../http/validation';
import { CreateMailboxDto } from '../mail/dto/create-mailbox.dto';
import { SetPolicyDto } from '../approvals/dto/set-policy.dto';
import { preparePolicy } from '../approvals/approval-policy';
import { DEFAULT_EXPIRY_SECONDS, MAX_EXPIRY_SECONDS } from '../approvals/approval.service';
import { CreateWebhookDto, ReplayWebhookDto, UpdateWebhookDto } from '../webhooks/dto/webhook.dto';
import { WriteCommand } from './command-line';

/**
 * Checks what a create (or change) command would store with the DTO of the REST call that does the
 * same thing, before the database is opened: the CLI refuses what REST refuses, with the same message
 * (e.g. `address must be an email address`).
 */
export async function validateInput(command: WriteCommand): Promise<void> {
  switch (command.name) {
    case 'mailboxes create':
      await validateBody(CreateMailboxDto, {
        address: command.address,
        ...(command.mailboxName !== null && { name: command.mailboxName }),
      });
      return;
    case 'tokens create':
      await validateBody(CreateTokenDto, {
        name: command.tokenName,
        scopes: command.scopes,
        mailboxes: command.mailboxes,
        ...(command.expiresAt && { expires_at: command.expiresAt.toISOString() }),
      });
      return;
    case 'grants create':
      await validateBody(CreateGrantDto, { principal: command.principal, mailboxes: command.mailboxes });
      return;
    case 'webhooks create':
      await validateBody(CreateWebhookDto, {
        url: command.url,
        events: command.events,
        mailbox_ids: command.mailboxes,
        ...(command.description !== null && { description: command.description }),
      });
      return;
    case 'webhooks update':
      await validateBody(UpdateWebhookDto, { ...command.changes });
      return;
    case 'webhooks replay':
      await validateBody(ReplayWebhookDto, { since_cursor: command.sinceCursor });
      return;
    case 'mailboxes policy set': {
      const body = await validateBody(SetPolicyDto, command.policy);
      // How the fields fit together too (the service checks again), so a bad file opens no database.
      preparePolicy({ ...body, defaultExpirySeconds: DEFAULT_EXPIRY_SECONDS, maxExpirySeconds: MAX_EXPIRY_SECONDS });
      // Replaced by the validated instance: what the service gets is exactly what REST would pass.
      Object.assign(command, { policy: body });
      return;
    }
    default:
      return;
  }
}
