/**
 * The mailbox address a recipient delivers to, or undefined when it cannot name one:
 * compared case-insensitively (mailbox addresses are stored lower-case), and `local+tag@domain`
 * delivers to `local@domain` (plus-addressing: the tag is the sender's, e.g. a per-service alias).
 * A quoted local part or a missing domain names no mailbox of ours.
 */
export function mailboxAddressOf(recipient: string): string | undefined {
  const address = recipient.trim().toLowerCase();
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return undefined;
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (local.startsWith('"')) return undefined;
  const plus = local.indexOf('+');
  const base = plus === -1 ? local : local.slice(0, plus);
  if (base.length === 0) return undefined;
  return `${base}@${domain}`;
}
