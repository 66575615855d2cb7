import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

export const USAGE = `Usage: npm run cli -- <command> [options]      (or: node dist/cli.js <command>)

  migrate                                         apply pending database migrations
  tokens create --name N --scopes a,b --mailboxes mbx_…,mbx_…|'*' [--expires-at ISO-8601]
                                                  create a token; prints its id and secret (shown once)
  tokens list                                     list tokens (never secrets)
  tokens revoke TOKEN_ID                          revoke a token at once
  grants create --principal sub:S|client:C|group:G --mailboxes mbx_…,mbx_…|'*'
                                                  grant mailboxes to an OAuth principal
  grants list                                     list grants
  grants revoke GRANT_ID                          delete a grant at once
  mailboxes create --address A [--name N] [--source-file F|-]
                                                  create a mailbox (with a connected account: its
                                                  source as JSON, from a file or - for standard input)
  mailboxes list                                  list mailboxes
  mailboxes source set MAILBOX_ID --file F|-      connect an account, or change its settings (merged)
  mailboxes source test MAILBOX_ID                sign in to the connected account; changes nothing
  mailboxes source pause MAILBOX_ID               stop syncing the account (resume: start again)
  mailboxes source resume MAILBOX_ID
  mailboxes source remove MAILBOX_ID              disconnect the account (its messages stay)
  mailboxes policy get MAILBOX_ID                 show the mailbox's approval policy
  mailboxes policy set MAILBOX_ID --file F|-      replace the approval policy with the JSON object in F
                                                  (- for standard input); fields left out take defaults
  webhooks create --url U --events a,b --mailboxes mbx_…,mbx_…|'*' [--description D]
                                                  create a webhook endpoint; prints its signing secret (shown once)
  webhooks list                                   list webhook endpoints (never secrets)
  webhooks update WEBHOOK_ID [--url U] [--events a,b] [--mailboxes mbx_…,mbx_…|'*'] [--description D]
                  [--disable|--enable]            change an endpoint (only what is given); --enable
                                                  takes a disabled one back (replay: what it missed)
  webhooks replay WEBHOOK_ID --since-cursor C     deliver again the endpoint's events after cursor C
  webhooks delete WEBHOOK_ID                      delete an endpoint (its deliveries go with it)
  webhooks rotate-secret WEBHOOK_ID               a new signing secret (shown once); the old one signs too for 24 h
  webhooks deliveries WEBHOOK_ID                  the endpoint's latest deliveries and their attempts
  audit verify [--file F]                         check the audit chain (or an export); names the first broken entry
  audit export [--since SEQ] [--output F]         write audit entries after SEQ as NDJSON

Options: --json  print JSON instead of text
Webhook events: message_received request_created request_state_changed message_delivery_changed mailbox_source_changed
Scopes: mail:read mail:send approvals:read approvals:decide mail:ingest webhooks:manage admin`;

export class UsageError extends Error {}

/**
 * A command line understood completely, before the CLI loads the application or opens the
 * database: a usage error answers at once and can change nothing.
 */
export type CliCommand = { readonly json: boolean } & (
  | { readonly name: 'migrate' }
  | {
      readonly name: 'tokens create';
      readonly tokenName: string;
      readonly scopes: string[];
      readonly mailboxes: string[];
      readonly expiresAt: Date | null;
    }
  | { readonly name: 'tokens list' }
  | { readonly name: 'tokens revoke'; readonly tokenId: string }
  | { readonly name: 'grants create'; readonly principal: string; readonly mailboxes: string[] }
  | { readonly name: 'grants list' }
  | { readonly name: 'grants revoke'; readonly grantId: string }
  | {
      readonly name: 'mailboxes create';
      readonly address: string;
      readonly mailboxName: string | null;
      readonly source?: Record<string, unknown>;
    }
  | { readonly name: 'mailboxes list' }
  | { readonly name: 'mailboxes source set'; readonly mailboxId: string; readonly source: Record<string, unknown> }
  | { readonly name: 'mailboxes source test' | 'mailboxes source remove'; readonly mailboxId: string }
  | { readonly name: 'mailboxes source pause' | 'mailboxes source resume'; readonly mailboxId: string }
  | { readonly name: 'mailboxes policy get'; readonly mailboxId: string }
  | { readonly name: 'mailboxes policy set'; readonly mailboxId: string; readonly policy: Record<string, unknown> }
  | {
      readonly name: 'webhooks create';
      readonly url: string;
      readonly events: string[];
      readonly mailboxes: string[];
      readonly description: string | null;
    }
  | { readonly name: 'webhooks list' }
  | { readonly name: 'webhooks update'; readonly webhookId: string; readonly changes: WebhookChanges }
  | { readonly name: 'webhooks replay'; readonly webhookId: string; readonly sinceCursor: string }
  | { readonly name: 'webhooks delete' | 'webhooks rotate-secret' | 'webhooks deliveries'; readonly webhookId: string }
);

/** `webhooks update`: the body of `PATCH /v1/webhooks/{id}`, only the fields given on the command line. */
export interface WebhookChanges {
  readonly url?: string;
  readonly events?: string[];
  readonly mailbox_ids?: string[];
  readonly description?: string;
  readonly enabled?: boolean;
}

/** Commands that only read: they run without the application (see read-commands.ts). */
export type ReadCommand = Extract<CliCommand, { name: 'tokens list' | 'grants list' | 'mailboxes list' }>;

export type WriteCommand = Exclude<CliCommand, ReadCommand>;

export function isReadCommand(command: CliCommand): command is ReadCommand {
  return command.name === 'tokens list' || command.name === 'grants list' || command.name === 'mailboxes list';
}

/**
 * `existsInCwd` tells whether a name is a file or directory in the current directory (the
 * shell-expansion check below); tests pass their own.
 */
export function parseCommandLine(argv: string[], existsInCwd: (name: string) => boolean = existsSync): CliCommand {
  const [group, action, ...rest] = argv;
  const sub = group === 'mailboxes' && (action === 'source' || action === 'policy') ? rest.shift() : undefined;
  const name = group === 'migrate' ? 'migrate' : [group ?? '', action ?? '', sub ?? ''].join(' ').trim();
  const { values, positionals } = parse(group === 'migrate' ? argv.slice(1) : rest);
  const json = values.json === true;

  switch (name) {
    case 'migrate':
    case 'tokens list':
    case 'grants list':
    case 'mailboxes list':
      return { name, json };
    case 'tokens create': {
      refuseShellExpansion(values.mailboxes, positionals, existsInCwd);
      const expiresAt = values['expires-at'] ? new Date(values['expires-at']) : null;
      if (expiresAt && Number.isNaN(expiresAt.getTime()))
        throw new UsageError('--expires-at must be an ISO 8601 date-time');
      return {
        name,
        json,
        tokenName: required(values.name, '--name'),
        scopes: list(required(values.scopes, '--scopes')),
        mailboxes: list(required(values.mailboxes, '--mailboxes')),
        expiresAt,
      };
    }
    case 'tokens revoke':
      return { name, json, tokenId: positional(positionals, 'tokens revoke needs a token id') };
    case 'grants create':
      refuseShellExpansion(values.mailboxes, positionals, existsInCwd);
      return {
        name,
        json,
        principal: required(values.principal, '--principal'),
        mailboxes: list(required(values.mailboxes, '--mailboxes')),
      };
    case 'webhooks create':
      refuseShellExpansion(values.mailboxes, positionals, existsInCwd);
      return {
        name,
        json,
        url: required(values.url, '--url'),
        events: list(required(values.events, '--events')),
        mailboxes: list(required(values.mailboxes, '--mailboxes')),
        description: values.description ?? null,
      };
    case 'webhooks list':
      return { name, json };
    case 'webhooks update': {
      const [webhookId, ...stray] = positionals;
      if (!webhookId) throw new UsageError(`${name} needs a webhook id`);
      refuseShellExpansion(values.mailboxes, stray, existsInCwd);
      return { name, json, webhookId, changes: webhookChanges(values) };
    }
    case 'webhooks replay':
      return {
        name,
        json,
        webhookId: positional(positionals, `${name} needs a webhook id`),
        sinceCursor: required(values['since-cursor'], '--since-cursor'),
      };
    case 'webhooks delete':
    case 'webhooks rotate-secret':
    case 'webhooks deliveries':
      return { name, json, webhookId: positional(positionals, `${name} needs a webhook id`) };
    case 'grants revoke':
      return { name, json, grantId: positional(positionals, 'grants revoke needs a grant id') };
    case 'mailboxes create':
      return {
        name,
        json,
        address: required(values.address, '--address'),
        mailboxName: values.name ?? null,
        ...(values['source-file'] && { source: jsonFile(values['source-file'], '--source-file', 'the source') }),
      };
    case 'mailboxes source set':
      return {
        name,
        json,
        mailboxId: positional(positionals, `${name} needs a mailbox id`),
        source: jsonFile(required(values.file, '--file'), '--file', 'the source'),
      };
    case 'mailboxes policy set':
      return {
        name,
        json,
        mailboxId: positional(positionals, `${name} needs a mailbox id`),
        policy: jsonFile(required(values.file, '--file'), '--file', 'the policy'),
      };
    case 'mailboxes policy get':
    case 'mailboxes source test':
    case 'mailboxes source remove':
    case 'mailboxes source pause':
    case 'mailboxes source resume':
      return { name, json, mailboxId: positional(positionals, `${name} needs a mailbox id`) };
    default:
      throw new UsageError(name ? `unknown command: ${name}` : 'no command given');
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
        'source-file': { type: 'string' },
        file: { type: 'string' },
        url: { type: 'string' },
        events: { type: 'string' },
        description: { type: 'string' },
        enable: { type: 'boolean' },
        disable: { type: 'boolean' },
        'since-cursor': { type: 'string' },
        json: { type: 'boolean' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/**
 * The flags of `webhooks update` as a PATCH body: a flag left out leaves its field as it is, so
 * a command that gives none would change nothing and is refused as a mistake.
 */
function webhookChanges(values: ReturnType<typeof parse>['values']): WebhookChanges {
  if (values.enable && values.disable) throw new UsageError('--enable and --disable exclude each other');
  const changes: WebhookChanges = {
    ...(values.url !== undefined && { url: values.url }),
    ...(values.events !== undefined && { events: list(values.events) }),
    ...(values.mailboxes !== undefined && { mailbox_ids: list(values.mailboxes) }),
    ...(values.description !== undefined && { description: values.description }),
    ...((values.enable || values.disable) && { enabled: values.enable === true }),
  };
  if (Object.keys(changes).length === 0) {
    throw new UsageError(
      'webhooks update needs something to change: --url, --events, --mailboxes, --description, --disable or --enable',
    );
  }
  return changes;
}

/**
 * `--mailboxes *` unquoted reaches us as the names of the files in the current directory: the first
 * one as the flag's value, the rest as stray words. Taken as mailbox ids they would fail with a
 * confusing "unknown mailbox Dockerfile" (or, with one file, look like a typo); say what happened.
 */
function refuseShellExpansion(
  mailboxes: string | undefined,
  positionals: string[],
  existsInCwd: (name: string) => boolean,
): void {
  const values = [...(mailboxes ? list(mailboxes) : []), ...positionals];
  const fileNames = values.filter((v) => v !== '*' && !v.startsWith('mbx_') && existsInCwd(v));
  if (fileNames.length === 0 && positionals.length === 0) return;
  if (fileNames.length > 0) {
    const shown = fileNames.slice(0, 3).join(', ') + (fileNames.length > 3 ? ', …' : '');
    throw new UsageError(
      `--mailboxes got file names (${shown}): the shell expanded an unquoted *. Quote it: --mailboxes '*'`,
    );
  }
  throw new UsageError(`unexpected argument: ${positionals[0]} (separate mailbox ids with commas, no spaces)`);
}

/**
 * A JSON object from a file or (`-`) standard input: a connected account's source (the password
 * or refresh token in it never has to appear on a command line, or in the shell's history) or a
 * mailbox's policy.
 */
function jsonFile(path: string, flag: string, what: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    throw new UsageError(`${flag}: ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${flag}: ${path} is not JSON (${(err as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(`${flag}: ${path} must hold a JSON object (${what})`);
  }
  return parsed as Record<string, unknown>;
}

function required(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`${flag} is required`);
  return value;
}

function positional(positionals: string[], missing: string): string {
  if (!positionals[0]) throw new UsageError(missing);
  return positionals[0];
}

function list(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
}
