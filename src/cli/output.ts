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

/** A mailbox's approval policy, one field a line, as `mailboxes policy get` prints it. */
export function policyText(p: {
  mailbox_id: string;
  approvers: readonly string[] | null;
  quorum: number;
  expires_after_seconds: number | null;
  escalate_after_seconds: number | null;
  escalate_to: readonly string[];
  recipients: { allow: readonly string[]; block: readonly string[]; auto_approve: boolean };
  updated_at: string | null;
}): string {
  return [
    `mailbox:     ${p.mailbox_id}`,
    `approvers:   ${p.approvers === null ? 'anyone with approvals:decide' : p.approvers.join(', ')}`,
    `quorum:      ${p.quorum}`,
    `expires:     ${p.expires_after_seconds === null ? 'default' : `${p.expires_after_seconds} s`}`,
    `escalation:  ${p.escalate_after_seconds === null ? 'none' : `after ${p.escalate_after_seconds} s to ${p.escalate_to.join(', ')}`}`,
    `allow:       ${p.recipients.allow.join(', ') || '-'}${p.recipients.auto_approve ? ' (auto-approve)' : ''}`,
    `block:       ${p.recipients.block.join(', ') || '-'}`,
    `updated:     ${p.updated_at ?? 'never (no policy set)'}`,
  ].join('\n');
}
