import { isIPv4, isIPv6 } from 'node:net';

/**
 * The key under which a client address is limited: an IPv4 address as it is, an IPv6 address by
 * its /64 network. One IPv6 host usually holds a whole /64 (SLAAC, privacy addresses) and can take
 * a fresh address for every request; keyed by address it would never run out of attempts. An
 * IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, what a dual-stack socket reports) is its IPv4 one.
 */
export function clientAddressKey(address: string | undefined): string {
  if (!address) return 'unknown';
  const plain = address.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(plain);
  if (mapped && isIPv4(mapped[1])) return mapped[1];
  if (isIPv4(plain)) return plain;
  if (isIPv6(plain)) return `${ipv6Groups(plain).slice(0, 4).join(':')}::/64`;
  return address;
}

/** The eight 16-bit groups of a valid IPv6 address, in lower-case hex without leading zeros. */
function ipv6Groups(address: string): string[] {
  let text = address.toLowerCase();
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups =
    tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.map((group) => Number.parseInt(group, 16).toString(16));
}
