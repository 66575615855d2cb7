import { grantView } from '../auth/grant.views';
import { CliCommand } from './command-line';

/** What a command prints: `json` with --json, else `text`. */
export interface CommandOutput {
  json: unknown;
  text: string;
  /** The command ran but what it checked failed (`mailboxes source test`): the exit status is 1. */
  failed?: boolean;
}

export function printOutput(command: CliCommand, output: CommandOutput): void {
  process.stdout.write(`${command.json ? JSON.stringify(output.json, null, 2) : output.text}\n`);
}

export function grantLine(g: ReturnType<typeof grantView>): string {
  return `${g.grant_id}  ${g.principal}  mailboxes=${g.mailboxes.join(',')}  created=${g.created_at}`;
}

/** A mailbox on one line: id, address, name, and its connected account's host and state. */
export function mailboxLine(mailbox: {
  mailbox_id: string;
  address: string;
  name: string | null;
  source?: object;
}): string {
  const source = mailbox.source as { host?: string; state?: string } | undefined;
  return [
    mailbox.mailbox_id,
    mailbox.address,
    ...(mailbox.name ? [mailbox.name] : []),
    ...(source ? [`source=${source.host} (${source.state})`] : []),
  ].join('  ');
}
