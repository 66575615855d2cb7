import { Inject, Injectable, Logger } from '@nestjs/common';
import { isIP } from 'node:net';
import { pipeline, Readable, Transform, TransformCallback } from 'node:stream';
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
 * Sender authentication of an inbound message (docs/mail.md): SPF (with an SMTP context only), DKIM,
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

  /**
   * The verdict on a message, given whole or as a stream (SMTP DATA as it arrives, which is read to
   * its end whatever the outcome). Never rejects: a message that cannot be read is `permerror`.
   */
  async verify(raw: Buffer | Readable, smtp?: SmtpEnvelopeContext): Promise<SenderVerdict> {
    const source = Buffer.isBuffer(raw) ? Readable.from([raw]) : raw;
    if (!this.config.mailAuthentication) {
      // Read and dropped; a failure of the stream is its other readers' to report.
      source.on('error', () => undefined).resume();
      return UNVERIFIED_SENDER;
    }
    const input = pipeline(source, new HeaderLineLimit(MAX_CHECKED_HEADER_LINES), () => undefined);
    // Listened to at once: the input may fail before mailauth (loaded on first use) reads it.
    const failed = new Promise<never>((_, reject) => input.once('error', reject));
    try {
      return senderVerdict(await Promise.race([this.check(input, smtp), failed]));
    } catch (err) {
      if (err instanceof TooManyHeaderLines) {
        this.logger.warn(`sender authentication skipped a header block of more than ${MAX_CHECKED_HEADER_LINES} lines`);
      } else if (!source.destroyed) {
        // Only the error's name: its message may quote the sender's headers.
        this.logger.warn(`sender authentication could not read a message (${(err as Error)?.name ?? 'error'})`);
      }
      return senderVerdict(UNREADABLE);
    } finally {
      // Whatever stopped the check lets go of the message (a stream it was read from ends here).
      input.destroy();
    }
  }

  private async check(raw: Readable, smtp: SmtpEnvelopeContext | undefined): Promise<CheckOutcomes> {
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

/** The header block of a message had more lines than are checked. */
export class TooManyHeaderLines extends Error {
  constructor(limit: number) {
    super(`more than ${limit} header lines`);
    this.name = 'TooManyHeaderLines';
  }
}

/**
 * Passes a message through, and fails with TooManyHeaderLines as soon as its header block (up to
 * the first empty line) has more than `limit` lines; the body is not looked at.
 */
export class HeaderLineLimit extends Transform {
  private lines = 0;
  private inHeader = true;
  /** Bytes of the current line seen in earlier chunks, and whether the last of them was a CR. */
  private carried = 0;
  private carriedCr = false;

  constructor(private readonly limit: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (!this.inHeader) return callback(null, chunk);
    let lineStart = 0;
    for (let i = chunk.indexOf(0x0a); i >= 0; i = chunk.indexOf(0x0a, i + 1)) {
      const cr = i > lineStart ? chunk[i - 1] === 0x0d : this.carriedCr;
      const length = this.carried + (i - lineStart) - (cr ? 1 : 0);
      this.carried = 0;
      this.carriedCr = false;
      lineStart = i + 1;
      if (length === 0) {
        this.inHeader = false;
        return callback(null, chunk);
      }
      if (++this.lines > this.limit) return callback(new TooManyHeaderLines(this.limit));
    }
    if (chunk.length > lineStart) {
      this.carried += chunk.length - lineStart;
      this.carriedCr = chunk[chunk.length - 1] === 0x0d;
    }
    callback(null, chunk);
  }
}
