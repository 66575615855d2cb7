import { DnsResolver } from '#app/mail/dns-resolver.js';

/** Records of one name by type; TXT values are whole strings (split into 255-byte pieces as DNS does). */
export type DnsRecords = Partial<Record<'TXT' | 'A' | 'AAAA' | 'MX' | 'PTR', string[]>>;

/** A resolver over a fixed record table that counts its lookups. */
export type DnsZone = DnsResolver & { lookups: Array<{ name: string; rrtype: string }> };

function dnsError(code: 'ENOTFOUND' | 'ENODATA', name: string, rrtype: string): Error {
  return Object.assign(new Error(`query${rrtype} ${code} ${name}`), { code, hostname: name });
}

/**
 * A DNS resolver that answers from `records` (name → type → values) and nothing else, as Node's
 * resolver would: an unknown name rejects with ENOTFOUND, a known name without the type with
 * ENODATA. Names compare case-insensitively, with or without the trailing dot. Tests never ask
 * the real DNS.
 */
export function dnsZone(records: Record<string, DnsRecords> = {}): DnsZone {
  const table = new Map(Object.entries(records).map(([name, byType]) => [canonical(name), byType]));
  const lookups: DnsZone['lookups'] = [];
  const resolve = (name: string, rrtype: string): Promise<string[][] | string[]> => {
    lookups.push({ name, rrtype });
    const byType = table.get(canonical(name));
    if (!byType) return Promise.reject(dnsError('ENOTFOUND', name, rrtype));
    const values = byType[rrtype as keyof DnsRecords];
    if (!values || values.length === 0) return Promise.reject(dnsError('ENODATA', name, rrtype));
    return Promise.resolve(rrtype === 'TXT' ? values.map(txtStrings) : [...values]);
  };
  return Object.assign(resolve, { lookups });
}

function canonical(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

function txtStrings(value: string): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < value.length; i += 255) pieces.push(value.slice(i, i + 255));
  return pieces.length > 0 ? pieces : [''];
}

/** A resolver whose lookups never settle (a dead DNS server): counts them like dnsZone. */
export function hangingResolver(): DnsZone {
  const lookups: DnsZone['lookups'] = [];
  const resolve = (name: string, rrtype: string) => {
    lookups.push({ name, rrtype });
    return new Promise<string[]>(() => undefined);
  };
  return Object.assign(resolve, { lookups });
}

/** A resolver whose lookups fail at once as a broken DNS server's do (SERVFAIL). */
export function failingResolver(): DnsZone {
  const lookups: DnsZone['lookups'] = [];
  const resolve = (name: string, rrtype: string) => {
    lookups.push({ name, rrtype });
    return Promise.reject(Object.assign(new Error(`query${rrtype} ESERVFAIL ${name}`), { code: 'ESERVFAIL' }));
  };
  return Object.assign(resolve, { lookups });
}
