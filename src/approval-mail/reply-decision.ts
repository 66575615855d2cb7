import EmailReplyParser from 'email-reply-parser';

/** What an approver's reply says: a decision with its reason, or nothing clear. */
export type ReplyDecision =
  { decision: 'approved' | 'rejected'; reason: string | null } | { decision: null; firstWord: string | null };

/**
 * Only the start of a reply is read: the decision is its first line, and the quoted approval mail
 * below it can be long. The bound also keeps the quote-finding regular expressions cheap on a
 * hostile message (the parser runs inside the transaction that stores it).
 */
const READ_CHARS = 16 * 1024;
/** As long as a reason may be through the API (DecideRequestDto). */
export const REASON_MAX_CHARS = 2000;

/** The words that decide, as people write them: `approve`, `Approved.`, `REJECT:`. */
const WORDS: Record<string, 'approved' | 'rejected'> = {
  approve: 'approved',
  approved: 'approved',
  reject: 'rejected',
  rejected: 'rejected',
};

/**
 * The decision of a reply to an approval mail (docs/approvers.md, "Deciding by reply"): the first
 * word of the first line that is neither blank nor quoted, case-insensitive, with punctuation around
 * it ignored; everything after it (the rest of that line and the lines below) is the reason.
 *
 * Quoted text and signatures are found by `email-reply-parser` (maintained, no dependencies): it
 * knows the "On … wrote:" and Outlook "From: … Sent: …" headers in many languages, "> " quotes,
 * "-- " signatures and "Sent from my …" lines. Lines starting with ">" are dropped here too, in case
 * a client puts its quote first (the parser keeps a reply written below the quote).
 */
export function parseReplyDecision(text: string): ReplyDecision {
  const visible = new EmailReplyParser().parseReply(text.slice(0, READ_CHARS).replace(/\r\n?/g, '\n'));
  const lines = visible.split('\n').filter((line) => !line.trimStart().startsWith('>'));
  const first = lines.findIndex((line) => line.trim().length > 0);
  if (first < 0) return { decision: null, firstWord: null };
  const line = lines[first].trim();
  const match = /^[^\p{L}\p{N}]*([\p{L}\p{N}]+)/u.exec(line);
  const word = match?.[1] ?? null;
  const decision = word === null ? undefined : WORDS[word.toLowerCase()];
  if (!decision) return { decision: null, firstWord: word };
  const rest = [line.slice(match![0].length).replace(/^[\s\p{P}]+/u, ''), ...lines.slice(first + 1)].join('\n').trim();
  return { decision, reason: rest.length > 0 ? rest.slice(0, REASON_MAX_CHARS) : null };
}
