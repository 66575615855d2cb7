import { promises as dns } from 'node:dns';
import { DynamicModule, Global, Module } from '@nestjs/common';

/**
 * A DNS lookup as sender authentication makes it: `(name, 'TXT' | 'A' | 'AAAA' | 'MX' | …)` → the
 * records, as `dns.promises.resolve` answers (TXT: one array of strings per record). A name without
 * records rejects with an error whose `code` is `ENOTFOUND` or `ENODATA`, as Node's resolver does.
 */
export type DnsResolver = (name: string, rrtype: string) => Promise<string[][] | string[]>;

/** Injection token of the DnsResolver (ServerOptions.dnsResolver, else Node's resolver). */
export const DNS_RESOLVER = Symbol('DNS_RESOLVER');

/**
 * The system's DNS servers (what /etc/resolv.conf names), asked with short timeouts of its own
 * (2 tries of 1.5 s), so that queries given up by BoundedDnsResolver do not linger in the
 * background for Node's default of 4 tries.
 */
let systemResolver: dns.Resolver | undefined;
export const systemDnsResolver: DnsResolver = (name, rrtype) => {
  systemResolver ??= new dns.Resolver({ timeout: 1500, tries: 2 });
  return systemResolver.resolve(name, rrtype) as Promise<string[][] | string[]>;
};

/** Shares the DNS resolver that sender authentication uses; tests inject their own records. */
@Global()
@Module({})
export class DnsModule {
  static forRoot(resolver: DnsResolver = systemDnsResolver): DynamicModule {
    return {
      module: DnsModule,
      providers: [{ provide: DNS_RESOLVER, useValue: resolver }],
      exports: [DNS_RESOLVER],
    };
  }
}
