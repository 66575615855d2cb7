import { ApprovalRequestEntity } from '../approvals/approval-request.entity';
import { describeRemoved } from '../approvals/draft-sanitizer';
import { OutboundMessageFields } from '../outbox/outbound-mail';

/** A header value on one line (titles are text an agent wrote). */
function oneLine(text: string): string {
  return text.replace(/[\r\n\t]+/g, ' ').trim();
}

/** The subject of a request's approval mail (and, after "Re: ", of the answers to replies to it). */
function approvalSubject(request: ApprovalRequestEntity): string {
  return oneLine(`Approval needed: ${request.title}`).slice(0, 200);
}

/** How to decide with a deciding link or by replying: the same words in approval and escalation mail. */
function howToDecide(linkUrl: string): string[] {
  return [
    'To approve or reject it, open this link. The page asks you to confirm; opening it decides nothing.',
    linkUrl,
    '',
    'The link is for you alone and works once, until the request expires or someone decides it.',
    '',
    'Or reply to this mail with "approve" or "reject" as the first word; the rest of your reply is the',
    'reason. A reply counts only from this address, and only when your mail provider signs it (DKIM or SPF).',
  ];
}

/**
 * The mail that asks `approver` to decide `request`, from the request's mailbox: a plain-text
 * summary and the one link to the confirmation page, where the approver approves or rejects, or a
 * reply starting with "approve" or "reject" (its `messageId`, Alcarta's own, is how a reply is
 * recognised). Plain text only: nothing in it can load or run anything in the approver's mail client.
 * `requesterName` names the credential that asked (null when it has no name any more).
 */
export function approvalMail(
  request: ApprovalRequestEntity,
  mailboxAddress: string,
  requesterName: string | null,
  approver: string,
  linkUrl: string,
  messageId: string,
  now: Date,
): OutboundMessageFields {
  const lines = [
    `An agent of ${mailboxAddress} asks for your decision.`,
    ...summary(request, requesterName),
    '',
    ...howToDecide(linkUrl),
  ];
  return { ...plainMail(mailboxAddress, approver, approvalSubject(request), lines, now), messageIdHeader: messageId };
}

/**
 * Where an escalation mail leads: a deciding link (`decides`, with the Message-ID of the mail a
 * reply answers), or the console's page of the request.
 */
export type EscalationLink = { url: string; decides: true; messageId: string } | { url: string; decides: false };

/**
 * The mail to `recipient` when nobody decided `request` by its policy's escalation time: how long
 * it has waited, the same summary as the approval mail, and a link. The link decides only when the
 * policy lets this address decide by mail; otherwise it is the request's page in the console.
 */
export function escalationMail(
  request: ApprovalRequestEntity,
  mailboxAddress: string,
  requesterName: string | null,
  recipient: string,
  link: EscalationLink,
  now: Date,
): OutboundMessageFields {
  // The wait the policy allowed when the request was made (its escalation time), at least a minute.
  const waited = (request.escalateAt ?? now).getTime() - request.createdAt.getTime();
  const minutes = Math.max(1, Math.round(waited / 60_000));
  const lines = [
    `Nobody decided this request of an agent of ${mailboxAddress} within ${minutes} minute${minutes === 1 ? '' : 's'}.`,
    `The mailbox's approval policy escalates it to you.`,
    ...summary(request, requesterName),
    '',
    ...(link.decides
      ? howToDecide(link.url)
      : ['To see it in the approvers console (approvers decide there), open:', link.url]),
  ];
  const mail = plainMail(mailboxAddress, recipient, `Escalated: ${request.title}`, lines, now);
  return link.decides ? { ...mail, messageIdHeader: link.messageId } : mail;
}

/** The request as both mails show it: title, who asked, details, the draft, its id and expiry. */
function summary(request: ApprovalRequestEntity, requesterName: string | null): string[] {
  const lines = [
    '',
    `Request: ${request.title}`,
    `Asked by: ${requesterName === null ? request.createdBy : `${requesterName} (${request.createdBy})`}`,
    ...(request.details ? ['', request.details] : []),
  ];
  if (request.email) {
    const draft = request.email;
    lines.push(
      '',
      'The email it wants to send:',
      `  From: ${draft.from}`,
      `  To: ${draft.to.join(', ')}`,
      ...(draft.cc.length > 0 ? [`  Cc: ${draft.cc.join(', ')}`] : []),
      `  Subject: ${draft.subject}`,
      '',
      ...draft.text.split(/\r?\n/).map((l) => `  ${l}`),
    );
    const removed = request.sanitized ? describeRemoved(request.sanitized) : '';
    if (draft.html) lines.push('', 'It also has an HTML version: the link shows it as it will be sent.');
    if (removed) lines.push(`Removed from the agent's HTML before the request was made: ${removed}.`);
  }
  lines.push('', `Request id: ${request.id}`, `Expires: ${request.expiresAt.toISOString()}`);
  return lines;
}

/** A plain-text mail from the request's mailbox to one person. */
function plainMail(
  from: string,
  to: string,
  subject: string,
  lines: readonly string[],
  now: Date,
): OutboundMessageFields {
  return {
    from,
    to: [to],
    cc: [],
    subject: oneLine(subject).slice(0, 200),
    text: lines.join('\n'),
    html: null,
    messageIdHeader: null,
    inReplyTo: null,
    references: [],
    receivedAt: now,
  };
}

/**
 * The answer to a reply that decided nothing (`note` says why), from the request's mailbox to the
 * reply's sender, in the reply's thread, with the same Message-ID on every attempt. Marked `Auto-Submitted: auto-replied` (RFC 3834), so that
 * well-behaved responders do not answer it, and Alcarta never answers such mail either.
 */
export function replyAnswerMail(
  request: ApprovalRequestEntity,
  mailboxAddress: string,
  to: string,
  note: string,
  inReplyTo: string | null,
  messageId: string,
  now: Date,
): OutboundMessageFields {
  const lines = [
    note,
    '',
    `Request: ${request.title}`,
    `Request id: ${request.id}`,
    `State: ${request.state}`,
    '',
    'This answer was sent automatically.',
  ];
  return {
    from: mailboxAddress,
    to: [to],
    cc: [],
    subject: `Re: ${approvalSubject(request)}`,
    text: lines.join('\n'),
    html: null,
    messageIdHeader: messageId,
    inReplyTo,
    references: inReplyTo ? [inReplyTo] : [],
    receivedAt: now,
    autoSubmitted: 'auto-replied',
  };
}
