import { Inject, Injectable, Logger } from '@nestjs/common';
import { isIP } from 'node:net';
import type { ARCData } from 'mailauth';
import { AppConfig } from '../config/app-config';
import { CheckOutcomes, senderVerdict } from './authentication-results';
import { BoundedDnsResolver } from './bounded-dns-resolver';
import { DNS_RESOLVER, DnsResolver } from './dns-resolver';
import { SenderVerdict, UNVERIFIED_SENDER } from './message-authentication';

/** What the SMTP session knew about the sender: the client's address, its HELO name, MAIL FROM. */
export interface SmtpEnvelopeContext {
  ip: string;
  helo: string;
  mailFrom: string;
}

/**
 * mailauth, loaded at the first check rather than at start-up: loading it costs about a second of
 * CPU, which the administrative CLI and replicas that never see raw mail need not pay.
 */
let mailauth: Promise<typeof import('mailauth')> | undefined;
const loadMailauth = () => (mailauth ??= import('mailauth'));

/** A message mailauth could not even read (it threw): nothing about its sender can be known. */
const UNREADABLE: CheckOutcomes = { dkim: ['permerror'], arc: 'permerror', dmarc: 'permerror' };

/**
 * Header blocks of more lines than this are not checked, and get the verdict of an unreadable
 * message. mailauth unfolds header fields in time quadratic in their continuation lines: one
 * hostile References field of 70,000 folded lines held the event loop for 30 s. Ordinary mail has
 * a few dozen header lines, long threads a few hundred; DKIM signers cover a handful of fields.
 */
export const MAX_CHECKED_HEADER_LINES = 2000;

/**
 * Sender authentication of an inbound message (SPEC 9): SPF (with an SMTP context only), DKIM,
 * DMARC and ARC, with mailauth's checks. They are called one by one rather than through
 * mailauth's `authenticate()`, which always runs SPF (without an SMTP client it would look up a
 * made-up domain), also fetches BIMI logos over HTTPS and seals ARC; and so that DNS trouble in
 * ARC, which mailauth reports as `fail`, is reported as `temperror`.
 *
 * The verdict never refuses mail: DNS trouble makes checks `temperror`, all lookups of a message
 * are bounded in time (DNS_TIME_LIMITS), and with ALCARTA_MAIL_AUTH=off nothing is looked up.
 */
@Injectable()
export class SenderAuthenticator {
  private readonly logger = new Logger(SenderAuthenticator.name);

  constructor(
    private readonly config: AppConfig,
    @Inject(DNS_RESOLVER) private readonly resolver: DnsResolver,
  ) {}

  async verify(raw: Buffer, smtp?: SmtpEnvelopeContext): Promise<SenderVerdict> {
    if (!this.config.mailAuthentication) return UNVERIFIED_SENDER;
    if (headerLinesExceed(raw, MAX_CHECKED_HEADER_LINES)) {
      this.logger.warn(`sender authentication skipped a header block of more than ${MAX_CHECKED_HEADER_LINES} lines`);
      return senderVerdict(UNREADABLE);
    }
    try {
      return senderVerdict(await this.check(raw, smtp));
    } catch (err) {
      // Only the error's name: its message may quote the sender's headers.
      this.logger.warn(`sender authentication could not read a message (${(err as Error)?.name ?? 'error'})`);
      return senderVerdict(UNREADABLE);
    }
  }

  private async check(raw: Buffer, smtp: SmtpEnvelopeContext | undefined): Promise<CheckOutcomes> {
    const { arc, dkimVerify, dmarc, spf } = await loadMailauth();
    const dns = new BoundedDnsResolver(this.resolver);
    const resolver = dns.resolve;

    const dkim = await dkimVerify(raw, { resolver });
    const spfResult = smtp
      ? await spf({
          ip: smtp.ip,
          // An address literal in HELO is checked in RFC 5321's bracket form, as mailauth does.
          helo: isIP(smtp.helo) ? `[${smtp.helo}]` : smtp.helo || `[${smtp.ip}]`,
          // A null reverse path (bounces) is checked as postmaster@<HELO name> (RFC 7208 2.4).
          sender: smtp.mailFrom || undefined,
          mta: this.config.smtpHostname,
          resolver,
        })
      : undefined;

    const failuresBeforeArc = dns.failures;
    // The chain that dkimVerify collected (a non-enumerable property), as authenticate() passes it.
    const arcResult = await arc((dkim.arc ?? { chain: false }) as unknown as ARCData, { resolver });
    const arcOutcome =
      arcResult.status.result === 'fail' && dns.failures > failuresBeforeArc ? 'temperror' : arcResult.status.result;

    // DMARC needs exactly one From address (RFC 7489 6.6.1); with none or several it cannot apply.
    const dmarcResult =
      dkim.headerFrom.length === 1
        ? await dmarc({
            headerFrom: dkim.headerFrom,
            spfDomains: spfResult?.status.result === 'pass' ? [spfResult.domain] : [],
            dkimDomains: dkim.results
              .filter((r) => r.status.result === 'pass')
              .map((r) => ({
                id: r.id,
                domain: r.signingDomain,
                aligned: r.status.aligned,
                underSized: r.status.underSized,
              })),
            arcResult,
            resolver,
          })
        : false;

    return {
      spf: spfResult?.status.result,
      dkim: dkim.results.map((r) => r.status.result),
      arc: arcOutcome,
      dmarc: dmarcResult ? dmarcResult.status.result : 'permerror',
    };
  }
}

/** Whether the header block (up to the first empty line) has more than `limit` lines. */
export function headerLinesExceed(raw: Buffer, limit: number): boolean {
  let lines = 0;
  let lineStart = 0;
  for (let i = raw.indexOf(0x0a); i >= 0; i = raw.indexOf(0x0a, i + 1)) {
    const length = i - lineStart - (i > lineStart && raw[i - 1] === 0x0d ? 1 : 0);
    if (length === 0) return false;
    if (++lines > limit) return true;
    lineStart = i + 1;
  }
  return false;
}
