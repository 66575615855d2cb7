import { AuthenticationResult, MessageAuthentication, SenderVerdict } from './message-authentication';

/**
 * How mailauth's result words become the seven values of docs/mail.md (RFC 8601). mailauth also answers:
 * - `policy` (a DKIM key shorter than 1024 bits: the signature may verify, but the key is too weak
 *   to trust) → `permerror`: a lasting fault of the signer's DNS that no retry changes;
 * - `temperr` (an older spelling) → `temperror`;
 * - `skipped` (a check that did not run) → `none`.
 * Anything else it might add later is neither a pass nor a failure we understand → `neutral`.
 */
export function authenticationResult(value: string | undefined | null): AuthenticationResult {
  switch (value) {
    case 'pass':
    case 'fail':
    case 'softfail':
    case 'neutral':
    case 'none':
    case 'temperror':
    case 'permerror':
      return value;
    case 'temperr':
      return 'temperror';
    case 'policy':
      return 'permerror';
    case 'skipped':
    case undefined:
    case null:
      return 'none';
    default:
      return 'neutral';
  }
}

/**
 * The outcome of the signatures that did not pass, most telling first: `temperror` before `fail`,
 * because a signature we could not check (its key did not come back in time) may be the author's
 * good one, and "unknown" must not be reported as "broken".
 */
const DKIM_PRECEDENCE: readonly AuthenticationResult[] = [
  'temperror',
  'fail',
  'permerror',
  'neutral',
  'softfail',
  'none',
];

/**
 * One DKIM value for a message with any number of signatures (RFC 6376 6.1: a message is
 * verified when one of its signatures verifies). `pass` when any signature passes, whoever signed
 * (whether the signer is the From domain is DMARC's question, answered by `from_verified`);
 * otherwise the most telling failure (DKIM_PRECEDENCE); no signature at all → `none`.
 */
export function dkimResult(signatures: ReadonlyArray<string | undefined>): AuthenticationResult {
  const results = signatures.map(authenticationResult);
  if (results.includes('pass')) return 'pass';
  return DKIM_PRECEDENCE.find((candidate) => results.includes(candidate)) ?? 'none';
}

/** What mailauth answered for one message, as plain result words (see SenderAuthenticator). */
export interface CheckOutcomes {
  /** Absent when there was no SMTP session to check (REST ingest). */
  spf?: string;
  /** One entry per DKIM signature. */
  dkim: ReadonlyArray<string | undefined>;
  arc: string;
  dmarc: string;
}

/**
 * The verdict stored with the message. `from_verified` is DMARC's `pass` and nothing else: only
 * DMARC ties a passing SPF or DKIM check to the domain of the From address that people read.
 */
export function senderVerdict(outcomes: CheckOutcomes): SenderVerdict {
  const authentication: MessageAuthentication = {
    spf: authenticationResult(outcomes.spf),
    dkim: dkimResult(outcomes.dkim),
    dmarc: authenticationResult(outcomes.dmarc),
    arc: authenticationResult(outcomes.arc),
  };
  return { authentication, fromVerified: authentication.dmarc === 'pass' };
}
