import { Caller } from '../kernel/caller';
import { AlcartaError, conflict, invalidRequest } from '../kernel/errors';

/** Most entries one list of a policy may hold (approvers, escalate_to, allow, block). */
export const MAX_POLICY_ENTRIES = 100;
/** The largest quorum: more people than this never sign off one request. */
export const MAX_QUORUM = 20;
/** Escalation and expiry are at least a minute away: shorter would page people for nothing. */
export const MIN_POLICY_SECONDS = 60;

/** A mailbox's approval policy (docs/policies.md), as the service applies it. */
export interface ApprovalPolicy {
  /** Who may approve or reject; null: every holder of `approvals:decide` on the mailbox. */
  approvers: readonly string[] | null;
  quorum: number;
  expiresAfterSeconds: number | null;
  escalateAfterSeconds: number | null;
  escalateTo: readonly string[];
  recipients: { allow: readonly string[]; block: readonly string[]; autoApprove: boolean };
}

/** The policy of a mailbox that has none: one approval by anyone who may decide, nothing else. */
export const NO_POLICY: ApprovalPolicy = {
  approvers: null,
  quorum: 1,
  expiresAfterSeconds: null,
  escalateAfterSeconds: null,
  escalateTo: [],
  recipients: { allow: [], block: [], autoApprove: false },
};

/** One approval of a request under quorum: who (as `decided_by` names them), when, and why. */
export interface RecordedApproval {
  by: string;
  at: string;
  reason: string | null;
}

/**
 * Adds one approval to a request under quorum: `recorded` while more are needed (the request
 * stays pending), `quorum_reached` when this one completes it. A request that needs a single
 * approval records none. Approvers are distinct by who decisions name (`decided_by`, addresses
 * case-insensitively): the same person approving again is a conflict, not a second vote.
 */
export function addApproval(
  request: { id: string; quorum: number; approvals: RecordedApproval[] },
  approval: RecordedApproval,
): 'recorded' | 'quorum_reached' {
  if (request.quorum <= 1) return 'quorum_reached';
  const same = (a: RecordedApproval) => a.by.toLowerCase() === approval.by.toLowerCase();
  if (request.approvals.some(same)) {
    throw conflict('already_approved', `${approval.by} has already approved this request; it needs another approver.`, {
      request_id: request.id,
      approvals: request.approvals.length,
      quorum: request.quorum,
    });
  }
  request.approvals = [...request.approvals, approval];
  return request.approvals.length >= request.quorum ? 'quorum_reached' : 'recorded';
}

/** When a request made at `createdAt` escalates under `policy`: null when never, or not before it expires. */
export function escalationTime(policy: ApprovalPolicy, createdAt: Date, expiresAt: Date): Date | null {
  if (policy.escalateAfterSeconds === null) return null;
  const at = new Date(createdAt.getTime() + policy.escalateAfterSeconds * 1000);
  return at < expiresAt ? at : null;
}

const APPROVER_SHAPE = /^(?:(?:sub|client|group|email):[^\p{Cc}\p{Cs}]+|tok_[A-Za-z0-9]+)$/u;
const ADDRESS_SHAPE = /^[^\s@\p{Cc}]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+$/u;
const DOMAIN_SHAPE = /^[a-z0-9-]+(?:\.[a-z0-9-]+)+$/;

/**
 * The policy a PUT body describes, checked as a whole: each field's shape (the DTO checked the
 * types), then how the fields fit together. Addresses and domains are kept lower-case, each once.
 * Throws 400 `invalid_policy` naming the field.
 */
export function preparePolicy(input: {
  approvers?: string[] | null;
  quorum?: number;
  expires_after_seconds?: number | null;
  escalate_after_seconds?: number | null;
  escalate_to?: string[];
  recipients?: { allow?: string[]; block?: string[]; auto_approve?: boolean };
  /** The expiry of a request that asks for none, under a policy without `expires_after_seconds`. */
  defaultExpirySeconds: number;
  maxExpirySeconds: number;
}): ApprovalPolicy {
  const refuse = (field: string, message: string) => invalidRequest('invalid_policy', message, { field });
  const approvers = input.approvers == null ? null : unique(input.approvers.map(normalApprover));
  approvers?.forEach((a) => {
    if (!APPROVER_SHAPE.test(a) || (a.startsWith('email:') && !ADDRESS_SHAPE.test(a.slice(6))))
      throw refuse('approvers', `"${a}" is not an approver: write sub:…, client:…, group:…, tok_… or email:<address>.`);
  });
  if (approvers?.length === 0) throw refuse('approvers', 'approvers is null (anyone may decide) or lists someone.');
  const quorum = input.quorum ?? 1;
  if (approvers && quorum > approvers.length)
    throw refuse('quorum', `A quorum of ${quorum} needs at least ${quorum} approvers; ${approvers.length} are listed.`);
  const expiresAfterSeconds = input.expires_after_seconds ?? null;
  if (expiresAfterSeconds !== null && expiresAfterSeconds > input.maxExpirySeconds)
    throw refuse('expires_after_seconds', `expires_after_seconds may be at most ${input.maxExpirySeconds}.`);
  const escalateAfterSeconds = input.escalate_after_seconds ?? null;
  const escalateTo = unique((input.escalate_to ?? []).map((a) => a.toLowerCase()));
  escalateTo.forEach((a) => {
    if (!ADDRESS_SHAPE.test(a)) throw refuse('escalate_to', `"${a}" is not an email address.`);
  });
  if ((escalateAfterSeconds === null) !== (escalateTo.length === 0))
    throw refuse(
      escalateAfterSeconds === null ? 'escalate_after_seconds' : 'escalate_to',
      'escalate_after_seconds and escalate_to go together: say when and to whom.',
    );
  // Against the expiry requests get by default: escalating later than that would never happen to them.
  const expiry = expiresAfterSeconds ?? input.defaultExpirySeconds;
  if (escalateAfterSeconds !== null && escalateAfterSeconds >= expiry)
    throw refuse(
      'escalate_after_seconds',
      `escalate_after_seconds must come before the requests expire (${expiry} seconds after they are made).`,
    );
  const allow = unique((input.recipients?.allow ?? []).map(normalRecipient));
  const block = unique((input.recipients?.block ?? []).map(normalRecipient));
  for (const [field, list] of [
    ['recipients.allow', allow],
    ['recipients.block', block],
  ] as const) {
    list.forEach((r) => {
      if (!ADDRESS_SHAPE.test(r) && !DOMAIN_SHAPE.test(r))
        throw refuse(field, `"${r}" is neither an email address nor a domain.`);
    });
  }
  const both = allow.find((r) => block.includes(r));
  if (both) throw refuse('recipients', `"${both}" is on both allow and block.`);
  const autoApprove = input.recipients?.auto_approve ?? false;
  if (autoApprove && allow.length === 0)
    throw refuse('recipients.auto_approve', 'auto_approve needs an allow list: it approves sends to those only.');
  return {
    approvers,
    quorum,
    expiresAfterSeconds,
    escalateAfterSeconds,
    escalateTo,
    recipients: { allow, block, autoApprove },
  };
}

/** The policy as `GET /v1/mailboxes/{id}/policy` shows it. */
export function policyView(mailboxId: string, p: ApprovalPolicy, updatedAt: Date | null) {
  return {
    mailbox_id: mailboxId,
    approvers: p.approvers,
    quorum: p.quorum,
    expires_after_seconds: p.expiresAfterSeconds,
    escalate_after_seconds: p.escalateAfterSeconds,
    escalate_to: p.escalateTo,
    recipients: { allow: p.recipients.allow, block: p.recipients.block, auto_approve: p.recipients.autoApprove },
    updated_at: updatedAt?.toISOString() ?? null,
  };
}

/**
 * Whether the policy lets `caller` approve or reject. An entry names a static token (`tok_…`), an
 * OAuth principal by subject, client or group, or a person by address (`email:`): the `email` claim
 * of a console sign-in, or the address an approval link or reply came from. Addresses compare
 * case-insensitively; approval links and replies carry no subject, client or group of an identity
 * provider, so only `email:` entries match them.
 */
export function mayDecide(policy: ApprovalPolicy, caller: Caller): boolean {
  if (policy.approvers === null) return true;
  return policy.approvers.some((entry) => matches(entry, caller));
}

function matches(entry: string, caller: Caller): boolean {
  if (entry.startsWith('tok_')) return caller.principal === null && caller.tokenId === entry;
  const p = caller.principal;
  if (!p) return false;
  const colon = entry.indexOf(':');
  const kind = entry.slice(0, colon);
  const name = entry.slice(colon + 1);
  if (kind === 'email') return p.email !== null && p.email.toLowerCase() === name;
  if (p.issuer === APPROVAL_BY_ADDRESS) return false;
  if (kind === 'sub') return p.subject === name;
  if (kind === 'client') return p.clientId === name;
  return (p.groups ?? []).includes(name);
}

/**
 * The issuer of a decider known by address alone (an approval link, a reply): its "subject" is
 * the address, never an identity provider's subject.
 */
export const APPROVAL_BY_ADDRESS = 'approval-link';

/** The answer to a decision by someone the policy does not list: 403, and nothing changes. */
export function notAnApprover(): AlcartaError {
  return new AlcartaError(
    'forbidden',
    'not_an_approver',
    "You are not among this mailbox's approvers: its policy names who may approve or reject its requests.",
  );
}

/** What the policy says about a send to `recipients` (to and cc). */
export type RecipientVerdict = { blocked: string[] } | { autoApprove: boolean };

/**
 * Blocked wins: any recipient on `block` (by address, or by domain including subdomains) refuses
 * the send. Otherwise a send whose every recipient is on `allow` is approved at once when
 * `auto_approve` is on; any other send waits for people.
 */
export function judgeRecipients(policy: ApprovalPolicy, recipients: readonly string[]): RecipientVerdict {
  const { allow, block, autoApprove } = policy.recipients;
  const blocked = recipients.filter((r) => onList(block, r));
  if (blocked.length > 0) return { blocked };
  return { autoApprove: autoApprove && recipients.length > 0 && recipients.every((r) => onList(allow, r)) };
}

function onList(list: readonly string[], recipient: string): boolean {
  const address = recipient.toLowerCase();
  const domain = address.slice(address.lastIndexOf('@') + 1);
  return list.some((entry) =>
    entry.includes('@') ? entry === address : domain === entry || domain.endsWith(`.${entry}`),
  );
}

/** The answer to a send to a blocked recipient: 403 naming them, and no request is made. */
export function recipientBlocked(blocked: readonly string[]): AlcartaError {
  return new AlcartaError(
    'forbidden',
    'recipient_blocked',
    `The mailbox's policy does not allow mail to ${blocked.join(', ')}.`,
    { recipients: blocked },
  );
}

function normalApprover(entry: string): string {
  return entry.startsWith('email:') ? entry.toLowerCase() : entry;
}

function normalRecipient(entry: string): string {
  const lower = entry.trim().toLowerCase();
  return lower.startsWith('@') ? lower.slice(1) : lower;
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
