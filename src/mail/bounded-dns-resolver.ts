import { DnsResolver } from './dns-resolver';

/**
 * Time limits of the DNS lookups of one message's sender authentication. A lookup answers in
 * milliseconds when DNS works; these only stop a dead or hanging resolver from holding an SMTP
 * session or a REST ingest open. One lookup may take LOOKUP_MS, all of a message's lookups
 * together TOTAL_MS (SPF alone may make ten): the verdict is ready within about TOTAL_MS, with
 * every check that could not get its answers as `temperror`.
 */
export const DNS_TIME_LIMITS = { lookupMs: 3000, totalMs: 6000 } as const;

/** A name that exists without records of the type, or does not exist: an answer, not a failure. */
function isNegativeAnswer(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ENOTFOUND' || code === 'ENODATA';
}

function timeoutError(name: string, rrtype: string): Error {
  // ETIMEOUT is the code Node's resolver gives a timed-out query; mailauth treats it as temperror.
  return Object.assign(new Error(`DNS lookup of ${rrtype} ${name} timed out`), { code: 'ETIMEOUT' });
}

/**
 * The resolver for one message: every lookup bounded in time (DNS_TIME_LIMITS), and failures
 * other than "no such record" counted, so that a check whose library reports DNS trouble as a
 * permanent failure (ARC) can be told apart.
 */
export class BoundedDnsResolver {
  private readonly deadline: number;
  /** Lookups that failed for a reason other than a negative answer (timeouts, SERVFAIL, …). */
  failures = 0;

  constructor(
    private readonly resolver: DnsResolver,
    private readonly limits: { lookupMs: number; totalMs: number } = DNS_TIME_LIMITS,
  ) {
    this.deadline = Date.now() + limits.totalMs;
  }

  readonly resolve: DnsResolver = async (name, rrtype) => {
    const allowedMs = Math.min(this.limits.lookupMs, this.deadline - Date.now());
    let timer: NodeJS.Timeout | undefined;
    try {
      if (allowedMs <= 0) throw timeoutError(name, rrtype);
      const expired = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(timeoutError(name, rrtype)), allowedMs);
      });
      // Through a promise, so a resolver that throws synchronously fails like one that rejects.
      return await Promise.race([Promise.resolve().then(() => this.resolver(name, rrtype)), expired]);
    } catch (err) {
      if (!isNegativeAnswer(err)) this.failures += 1;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  };
}
