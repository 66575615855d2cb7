import { INestApplicationContext } from '@nestjs/common';
import { parseArgs } from 'node:util';
import { AlcartaError } from '../common/errors';
import { GrantService } from '../auth/grant.service';
import { TokenService } from '../auth/token.service';
import { MigrationRunner } from '../database/migration-runner';
import { MailboxService } from '../mail/mailbox.service';
import { OPERATOR } from '../auth/caller';

export const USAGE = `Usage: npm run cli -- <command> [options]      (or: node dist/cli.js <command>)

  migrate                                         apply pending database migrations
  tokens create --name N --scopes a,b --mailboxes mbx_…,mbx_…|* [--expires-at ISO-8601]
                                                  create a token; prints its id and secret (shown once)
  tokens list                                     list tokens (never secrets)
  tokens revoke TOKEN_ID                          revoke a token at once
  grants create --principal sub:S|client:C|group:G --mailboxes mbx_…,mbx_…|*
                                                  grant mailboxes to an OAuth principal
  grants list                                     list grants
  grants revoke GRANT_ID                          delete a grant at once
  mailboxes create --address A [--name N]         create a mailbox
  mailboxes list                                  list mailboxes

Options: --json  print JSON instead of text
Scopes: mail:read mail:send approvals:read approvals:decide mail:ingest admin`;

export class UsageError extends Error {}

export interface CommandOutput {
  json: unknown;
  text: string;
}

export function needsSchema(argv: string[]): boolean {
  return argv[0] !== 'migrate';
}

export async function runCommand(app: INestApplicationContext, argv: string[]): Promise<CommandOutput> {
  const [group, action, ...rest] = argv;
  const command = group === 'migrate' ? 'migrate' : `${group} ${action ?? ''}`.trim();
  const args = group === 'migrate' ? [action, ...rest].filter((a) => a !== undefined) : rest;
  const { values, positionals } = parse(args);

  switch (command) {
    case 'migrate': {
      const applied = await app.get(MigrationRunner).run();
      return {
        json: { applied },
        text: applied.length ? `applied: ${applied.join(', ')}` : 'database schema is up to date',
      };
    }
    case 'tokens create': {
      const expiresAt = values['expires-at'] ? new Date(values['expires-at']) : null;
      if (expiresAt && Number.isNaN(expiresAt.getTime()))
        throw new UsageError('--expires-at must be an ISO 8601 date-time');
      const token = await app.get(TokenService).create(OPERATOR, {
        name: required(values.name, '--name'),
        scopes: list(required(values.scopes, '--scopes')),
        mailboxes: list(required(values.mailboxes, '--mailboxes')),
        expiresAt,
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
    case 'tokens list': {
      const result = await app.get(TokenService).list(OPERATOR);
      return {
        json: result,
        text: result.tokens
          .map(
            (t) =>
              `${t.token_id}  ${t.name}  scopes=${t.scopes.join(',')}  mailboxes=${t.mailboxes.join(',')}` +
              `${t.expires_at ? `  expires=${t.expires_at}` : ''}${t.revoked_at ? '  REVOKED' : ''}`,
          )
          .join('\n'),
      };
    }
    case 'tokens revoke': {
      const tokenId = positionals[0];
      if (!tokenId) throw new UsageError('tokens revoke needs a token id');
      await app.get(TokenService).revoke(OPERATOR, tokenId);
      return { json: { token_id: tokenId, revoked: true }, text: `revoked ${tokenId}` };
    }
    case 'grants create': {
      const grant = await app.get(GrantService).create(OPERATOR, {
        principal: required(values.principal, '--principal'),
        mailboxes: list(required(values.mailboxes, '--mailboxes')),
      });
      return { json: grant, text: grantLine(grant) };
    }
    case 'grants list': {
      const result = await app.get(GrantService).list(OPERATOR);
      return { json: result, text: result.grants.map(grantLine).join('\n') };
    }
    case 'grants revoke': {
      const grantId = positionals[0];
      if (!grantId) throw new UsageError('grants revoke needs a grant id');
      await app.get(GrantService).revoke(OPERATOR, grantId);
      return { json: { grant_id: grantId, revoked: true }, text: `revoked ${grantId}` };
    }
    case 'mailboxes create': {
      const mailbox = await app
        .get(MailboxService)
        .create(OPERATOR, required(values.address, '--address'), values.name ?? null);
      return {
        json: mailbox,
        text: `${mailbox.mailbox_id}  ${mailbox.address}${mailbox.name ? `  ${mailbox.name}` : ''}`,
      };
    }
    case 'mailboxes list': {
      const result = await app.get(MailboxService).list(OPERATOR);
      return {
        json: result,
        text: result.mailboxes.map((m) => `${m.mailbox_id}  ${m.address}${m.name ? `  ${m.name}` : ''}`).join('\n'),
      };
    }
    default:
      throw new UsageError(command ? `unknown command: ${command}` : 'no command given');
  }
}

function parse(args: string[]) {
  try {
    return parseArgs({
      args,
      allowPositionals: true,
      options: {
        name: { type: 'string' },
        scopes: { type: 'string' },
        mailboxes: { type: 'string' },
        'expires-at': { type: 'string' },
        address: { type: 'string' },
        principal: { type: 'string' },
        json: { type: 'boolean' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function grantLine(g: { grant_id: string; principal: string; mailboxes: string[]; created_at: string }): string {
  return `${g.grant_id}  ${g.principal}  mailboxes=${g.mailboxes.join(',')}  created=${g.created_at}`;
}

function required(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`${flag} is required`);
  return value;
}

function list(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
}

export function describeFailure(err: unknown): string {
  if (err instanceof AlcartaError) return `${err.code} (${err.reason}): ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}
