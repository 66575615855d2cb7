import { isIP } from 'node:net';

/** Ranges Express (proxy-addr) knows by name: 127.0.0.0/8 and ::1; 169.254.0.0/16 and fe80::/10; 10/8, 172.16/12, 192.168/16 and fc00::/7. */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** The entries of ALCARTA_TRUSTED_PROXIES: comma-separated, blanks ignored. */
export function trustedProxyEntries(text: string): string[] {
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}

/**
 * Whether `entry` names proxies: an IPv4 or IPv6 address, a CIDR range of one (`10.0.0.0/8`,
 * `fd00::/8`), or one of the named ranges. Netmask notation and host names are refused, so that
 * a typo stops the start instead of trusting something else.
 */
export function isTrustedProxyEntry(entry: string): boolean {
  if (NAMED_RANGES.has(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128);
}
