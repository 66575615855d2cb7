/** The outcome of one sender-authentication check (RFC 8601 result values). */
export type AuthenticationResult = 'pass' | 'fail' | 'softfail' | 'neutral' | 'none' | 'temperror' | 'permerror';

export const AUTHENTICATION_RESULTS: readonly AuthenticationResult[] = [
  'pass',
  'fail',
  'softfail',
  'neutral',
  'none',
  'temperror',
  'permerror',
];

/** What sender authentication (docs/mail.md) shows on a message and in its `message_received` event. */
export interface MessageAuthentication {
  spf: AuthenticationResult;
  dkim: AuthenticationResult;
  dmarc: AuthenticationResult;
  arc: AuthenticationResult;
}

/** JSON ingest, outbound mail, ALCARTA_MAIL_AUTH=off: nothing was checked. */
export const UNAUTHENTICATED: MessageAuthentication = Object.freeze({
  spf: 'none',
  dkim: 'none',
  dmarc: 'none',
  arc: 'none',
});

/** The sender-authentication verdict stored with an inbound message. */
export interface SenderVerdict {
  authentication: MessageAuthentication;
  /** True only when DMARC passed for the From domain. */
  fromVerified: boolean;
}

export const UNVERIFIED_SENDER: SenderVerdict = Object.freeze({ authentication: UNAUTHENTICATED, fromVerified: false });
