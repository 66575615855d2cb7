import { isIP } from 'node:net';

/** A DNS host name: labels of letters, digits, hyphens and underscores, separated by dots. */
const HOST_NAME =
  /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/**
 * The entries of ALCARTA_WEBHOOK_ALLOWED_HOSTS: comma-separated, blanks ignored, written as they
 * are compared (lower case, no trailing dot, an IPv6 address without brackets).
 */
export function webhookAllowedHostEntries(text: string): string[] {
  return text
    .split(',')
    .map((entry) =>
      entry
        .trim()
        .toLowerCase()
        .replace(/^\[(.*)\]$/, '$1')
        .replace(/\.$/, ''),
    )
    .filter((entry) => entry !== '');
}

/**
 * Whether `entry` (as webhookAllowedHostEntries writes it) is a host name or an IP address.
 * Ranges, ports and URLs are refused, so that a typo stops the start instead of allowing
 * something else or nothing.
 */
export function isWebhookAllowedHostEntry(entry: string): boolean {
  return isIP(entry) !== 0 || HOST_NAME.test(entry);
}
