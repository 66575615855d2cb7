import { ApprovalRequestEntity } from '../approvals/approval-request.entity';
import { describeRemoved } from '../approvals/draft-sanitizer';
import { OutboundMessageFields } from '../outbox/outbound-mail';

/** A header value on one line (titles are text an agent wrote). */
function oneLine(text: string): string {
  return text.replace(/[\r\n\t]+/g, ' ').trim();
}

/**
 * The mail that asks `approver` to decide `request`, from the request's mailbox: a plain-text
 * summary and the one link to the confirmation page, where the approver approves or rejects.
 * Plain text only: nothing in it can load or run anything in the approver's mail client.
 * `requesterName` names the credential that asked (null when it has no name any more).
 */
export function approvalMail(
  request: ApprovalRequestEntity,
  mailboxAddress: string,
  requesterName: string | null,
  approver: string,
  linkUrl: string,
  now: Date,
): OutboundMessageFields {
  const lines = [
    `An agent of ${mailboxAddress} asks for your decision.`,
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
  lines.push(
    '',
    `Request id: ${request.id}`,
    `Expires: ${request.expiresAt.toISOString()}`,
    '',
    'To approve or reject it, open this link. The page asks you to confirm; opening it decides nothing.',
    linkUrl,
    '',
    'The link is for you alone and works once, until the request expires or someone decides it.',
  );
  return {
    from: mailboxAddress,
    to: [approver],
    cc: [],
    subject: oneLine(`Approval needed: ${request.title}`).slice(0, 200),
    text: lines.join('\n'),
    html: null,
    messageIdHeader: null,
    inReplyTo: null,
    references: [],
    receivedAt: now,
  };
}
