import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { ApprovalService, DEFAULT_EXPIRY_SECONDS, MAX_EXPIRY_SECONDS } from '../../approvals/approval.service';
import { defineTool, ToolDefinition, ToolProvider } from '../tool-definition';

const expiresInSeconds = z
  .number()
  .int()
  .min(1)
  .optional()
  .describe(
    `Seconds until the request expires if nobody decides (default: the mailbox policy's expires_after_seconds, else ${DEFAULT_EXPIRY_SECONDS}; at most ${MAX_EXPIRY_SECONDS}).`,
  );
const requestId = z.string().min(1).describe('Request id (chk_…).');

@Injectable()
export class ApprovalTools implements ToolProvider {
  constructor(private readonly approvals: ApprovalService) {}

  tools(): ToolDefinition[] {
    return [
      defineTool({
        name: 'send_email',
        title: 'Send an email (after human approval)',
        description:
          'Asks a person to approve sending an email from one of your mailboxes. Nothing is sent now: the call ' +
          'returns a pending approval request (chk_…). Once a person approves it, the message is sent and recorded ' +
          'in the mailbox as outbound; if they reject it, or nobody decides before it expires, nothing is sent. ' +
          'Wait for the decision with monitor_approval (or email_await) instead of polling get_request. To reply ' +
          'to a message, pass its id as in_reply_to_message_id so the reply joins the thread. The HTML body is ' +
          'sanitized before the request is made, and the sanitized draft is what the person sees and what is sent: ' +
          'no scripts, event handlers, styles or forms, and no remote or relative images or other resources ' +
          '(inline data:image/ images are kept). The result\'s "sanitized" counts what was removed; ' +
          '"content_sha256" identifies the exact content a person approves. Under the mailbox\'s approval policy a ' +
          'blocked recipient is refused (recipient_blocked), and a send to routine recipients only may come back ' +
          'already approved (decided_by "policy").',
        input: z
          .object({
            mailbox_id: z.string().min(1).describe('Mailbox to send from (mbx_…).'),
            to: z.array(z.email()).min(1).max(100).describe('Recipient addresses.'),
            cc: z.array(z.email()).max(100).optional().describe('Carbon-copy addresses.'),
            subject: z.string().max(2000),
            text: z.string().describe('Plain-text body.'),
            html: z.string().optional().describe('Optional HTML body.'),
            in_reply_to_message_id: z.string().min(1).optional().describe('Id (msg_…) of the message this replies to.'),
            expires_in_seconds: expiresInSeconds,
          })
          .strict(),
        scopes: ['mail:send'],
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
        handle: (args, { caller }) =>
          this.approvals.requestEmail(caller, {
            mailboxId: args.mailbox_id,
            to: args.to,
            cc: args.cc,
            subject: args.subject,
            text: args.text,
            html: args.html,
            inReplyToMessageId: args.in_reply_to_message_id,
            expiresInSeconds: args.expires_in_seconds,
          }),
      }),
      defineTool({
        name: 'request_approval',
        title: 'Ask a person for approval',
        description:
          'Asks a person to approve or reject something before you act (a payment, a deletion, a commitment). ' +
          'Returns a pending request (chk_…) at once; a person decides through the approvals API. Wait for the ' +
          'decision with monitor_approval (or email_await) rather than polling get_request.',
        input: z
          .object({
            mailbox_id: z
              .string()
              .min(1)
              .describe('Mailbox the request belongs to (mbx_…); it decides who can see it.'),
            title: z.string().min(1).max(500).describe('One line saying what needs approval.'),
            details: z.string().max(20000).optional().describe('Everything the person needs to decide.'),
            expires_in_seconds: expiresInSeconds,
          })
          .strict(),
        scopes: ['approvals:read'],
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
        handle: (args, { caller }) =>
          this.approvals.requestApproval(caller, {
            mailboxId: args.mailbox_id,
            title: args.title,
            details: args.details,
            expiresInSeconds: args.expires_in_seconds,
          }),
      }),
      defineTool({
        name: 'get_request',
        title: 'Look at an approval request',
        description:
          'Returns an approval request with its current state (pending, approved, rejected, expired, cancelled), ' +
          'who decided and why. For waiting on a decision use monitor_approval instead of calling this in a loop.',
        input: z.object({ request_id: requestId }).strict(),
        scopes: ['approvals:read'],
        annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
        handle: (args, { caller }) => this.approvals.get(caller, args.request_id),
      }),
      defineTool({
        name: 'cancel_request',
        title: 'Withdraw an approval request',
        description:
          'Withdraws a pending approval request (for send_email: the email will not be sent). Fails with ' +
          '"conflict" if the request was already decided, expired or cancelled.',
        input: z.object({ request_id: requestId }).strict(),
        scopes: ['approvals:read'],
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
        handle: (args, { caller }) => this.approvals.cancel(caller, args.request_id),
      }),
    ];
  }
}
