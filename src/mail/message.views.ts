import { MailboxEntity } from './mailbox.entity';
import { MessageEntity } from './message.entity';

/** The JSON shapes of the tools (docs/agents.md, "Tools"), used alike by the MCP tools and the REST API. */
/** `source`: the connected account's view, for a mailbox that has one (docs/connected-mailboxes.md). */
export function mailboxView(m: Pick<MailboxEntity, 'id' | 'address' | 'name'>, source?: object) {
  return { mailbox_id: m.id, address: m.address, name: m.name, ...(source && { source }) };
}

export function messageSummary(m: MessageEntity) {
  return {
    message_id: m.id,
    mailbox_id: m.mailboxId,
    direction: m.direction,
    from: m.from,
    to: m.to,
    subject: m.subject,
    received_at: m.receivedAt.toISOString(),
    ...(m.direction === 'inbound' && { authentication: m.authentication, from_verified: m.fromVerified }),
  };
}

export function messageDetail(m: MessageEntity) {
  return {
    ...messageSummary(m),
    cc: m.cc,
    text: m.text,
    html: m.html,
    message_id_header: m.messageIdHeader,
    in_reply_to: m.inReplyTo,
    thread_id: m.threadId,
  };
}
