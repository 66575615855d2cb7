import { INestApplicationContext } from '@nestjs/common';
import { OPERATOR } from '../kernel/caller';
import { GrantService } from '../auth/grant.service';
import { TokenService } from '../auth/token.service';
import { AlcartaError } from '../kernel/errors';
import { MigrationRunner } from '../database/migration-runner';
import { MailboxSourceService } from '../connected-mailboxes/mailbox-source.service';
import { MailboxService } from '../mail/mailbox.service';
import { MailboxPolicyService } from '../approvals/mailbox-policy.service';
import { WriteCommand } from './command-line';
import { CommandOutput, grantLine, mailboxLine, policyText } from './output';
import { runWebhookCommand } from './webhook-commands';

/**
 * A command run in the application context: one that changes something, or reads through a service
 * (the plain listings: read-commands.ts).
 */
export async function runCommand(app: INestApplicationContext, command: WriteCommand): Promise<CommandOutput> {
  switch (command.name) {
    case 'migrate': {
      const applied = await app.get(MigrationRunner).run();
      return {
        json: { applied },
        text: applied.length ? `applied: ${applied.join(', ')}` : 'database schema is up to date',
      };
    }
    case 'tokens create': {
      const token = await app.get(TokenService).create(OPERATOR, {
        name: command.tokenName,
        scopes: command.scopes,
        mailboxes: command.mailboxes,
        expiresAt: command.expiresAt,
      });
      return {
        json: token,
        text: [
          `token_id:  ${token.token_id}`,
          `secret:    ${token.secret}`,
          `scopes:    ${token.scopes.join(',')}`,
          `mailboxes: ${token.mailboxes.join(',')}`,
          `expires:   ${token.expires_at ?? 'never'}`,
          'The secret is shown only now; Alcarta keeps just its hash.',
        ].join('\n'),
      };
    }
    case 'tokens revoke':
      await app.get(TokenService).revoke(OPERATOR, command.tokenId);
      return { json: { token_id: command.tokenId, revoked: true }, text: `revoked ${command.tokenId}` };
    case 'grants create': {
      const grant = await app.get(GrantService).create(OPERATOR, {
        principal: command.principal,
        mailboxes: command.mailboxes,
      });
      return { json: grant, text: grantLine(grant) };
    }
    case 'grants revoke':
      await app.get(GrantService).revoke(OPERATOR, command.grantId);
      return { json: { grant_id: command.grantId, revoked: true }, text: `revoked ${command.grantId}` };
    case 'mailboxes create': {
      const mailbox = await app
        .get(MailboxService)
        .create(OPERATOR, command.address, command.mailboxName, command.source);
      return { json: mailbox, text: mailboxLine(mailbox) };
    }
    case 'mailboxes source set':
    case 'mailboxes source pause':
    case 'mailboxes source resume':
    case 'mailboxes source remove': {
      const source =
        command.name === 'mailboxes source set'
          ? command.source
          : command.name === 'mailboxes source remove'
            ? null
            : { paused: command.name === 'mailboxes source pause' };
      const mailbox = await app.get(MailboxService).update(OPERATOR, command.mailboxId, { source });
      return { json: mailbox, text: mailboxLine(mailbox) };
    }
    case 'mailboxes policy get': {
      const policy = await app.get(MailboxPolicyService).get(OPERATOR, command.mailboxId);
      return { json: policy, text: policyText(policy) };
    }
    case 'mailboxes policy set': {
      // The body was checked against SetPolicyDto before the database was opened (input-validation.ts).
      const policy = await app.get(MailboxPolicyService).put(OPERATOR, command.mailboxId, command.policy);
      return { json: policy, text: policyText(policy) };
    }
    case 'mailboxes source test': {
      const result = await app.get(MailboxSourceService).test(OPERATOR, command.mailboxId);
      return {
        json: result,
        text: result.ok
          ? [
              `ok: signed in`,
              ...result.imap.folders.map((f) => `folder ${f.name}: ${f.messages} messages`),
              ...(result.smtp ? ['submission: signed in'] : []),
            ].join('\n')
          : `failed at ${result.stage} (${result.reason}): ${result.message}`,
        failed: !result.ok,
      };
    }
    case 'webhooks create':
    case 'webhooks list':
    case 'webhooks update':
    case 'webhooks replay':
    case 'webhooks delete':
    case 'webhooks rotate-secret':
    case 'webhooks deliveries':
      return runWebhookCommand(app, command);
  }
}

export function describeFailure(err: unknown): string {
  if (err instanceof AlcartaError) {
    // Name the field a refusal is about when its message does not (`"bob" is not an approver…`).
    const field = err.details.field;
    const named = typeof field === 'string' && !err.message.includes(field) ? ` [field: ${field}]` : '';
    return `${err.code} (${err.reason}): ${err.message}${named}`;
  }
  return err instanceof Error ? err.message : String(err);
}
