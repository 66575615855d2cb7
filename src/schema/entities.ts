import { ApprovalLinkEntity } from '../approval-mail/approval-link.entity';
import { ApprovalMailEntity } from '../approval-mail/approval-mail.entity';
import { ApprovalReplyEntity } from '../approval-mail/approval-reply.entity';
import { MailboxApproverEntity } from '../approval-mail/mailbox-approver.entity';
import { ApprovalRequestEntity } from '../approvals/approval-request.entity';
import { MailboxPolicyEntity } from '../approvals/mailbox-policy.entity';
import { GrantEntity } from '../auth/grant.entity';
import { PrincipalEntity } from '../auth/principal.entity';
import { TokenEntity } from '../auth/token.entity';
import { MailboxSourceEntity } from '../connected-mailboxes/mailbox-source.entity';
import { SourceFolderEntity } from '../connected-mailboxes/source-folder.entity';
import { SyncHolderEntity } from '../connected-mailboxes/sync-holder.entity';
import { AuditCheckpointEntity, AuditEntryEntity, AuditHeadEntity } from '../audit/audit.entities';
import { ConsoleSessionEntity } from '../console/console-session.entity';
import { EventEntity } from '../events/event.entity';
import { EventSubscriptionEntity } from '../event-subscriptions/event-subscription.entity';
import { MailboxEntity } from '../mail/mailbox.entity';
import { MessageEntity } from '../mail/message.entity';
import { OutboundDeliveryEntity } from '../outbox/outbound-delivery.entity';
import { TaskEntity } from '../tasks/task.entity';
import { PersistedWaitEntity } from '../waits/persisted-wait.entity';
import { WebhookAttemptEntity, WebhookDeliveryEntity } from '../webhooks/webhook-delivery.entity';
import { WebhookEndpointEntity } from '../webhooks/webhook-endpoint.entity';

/**
 * Every table's entity. Registered as a whole (not per feature module) because entities reference
 * each other through their foreign keys, and a process that loads only some modules (the CLI) still
 * needs the full picture of the schema.
 */
export const ENTITIES = [
  TokenEntity,
  MailboxEntity,
  MessageEntity,
  ApprovalRequestEntity,
  MailboxPolicyEntity,
  EventEntity,
  PersistedWaitEntity,
  TaskEntity,
  OutboundDeliveryEntity,
  GrantEntity,
  PrincipalEntity,
  ConsoleSessionEntity,
  MailboxApproverEntity,
  ApprovalLinkEntity,
  ApprovalMailEntity,
  ApprovalReplyEntity,
  MailboxSourceEntity,
  SourceFolderEntity,
  SyncHolderEntity,
  AuditEntryEntity,
  AuditHeadEntity,
  AuditCheckpointEntity,
  WebhookEndpointEntity,
  EventSubscriptionEntity,
  WebhookDeliveryEntity,
  WebhookAttemptEntity,
];
