import { Injectable } from '@nestjs/common';
import { SenderVerdict, UNVERIFIED_SENDER } from './message-authentication';

/** What the SMTP session knew about the sender: the client's address, its HELO name, MAIL FROM. */
export interface SmtpEnvelopeContext {
  ip: string;
  helo: string;
  mailFrom: string;
}

/**
 * Sender authentication of an inbound message (SPEC 9): SPF (with an SMTP context only), DKIM,
 * DMARC and ARC.
 */
@Injectable()
export class SenderAuthenticator {
  verify(_raw: Buffer, _smtp?: SmtpEnvelopeContext): Promise<SenderVerdict> {
    return Promise.resolve(UNVERIFIED_SENDER);
  }
}
