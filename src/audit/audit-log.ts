import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { Caller, OPERATOR } from '../kernel/caller';
import { AuditActor, chainEntry } from './audit-chain';
import { currentClientAddress } from './audit-context';

/** The acts the trail records (docs/audit.md, "Actions"). */
export type AuditAction =
  | 'token_created'
  | 'token_revoked'
  | 'grant_created'
  | 'grant_revoked'
  | 'console_signed_in'
  | 'mailbox_created'
  | 'mailbox_updated'
  | 'mailbox_source_changed'
  | 'request_created'
  | 'request_approved'
  // One approval of a request under quorum that leaves it pending.
  | 'request_approval_recorded'
  | 'request_rejected'
  | 'request_cancelled'
  | 'message_send_attempted'
  | 'policy_changed'
  | 'request_escalated'
  | 'webhook_created'
  | 'webhook_updated'
  | 'webhook_deleted'
  | 'webhook_secret_rotated';

export interface NewAuditEntry {
  action: AuditAction;
  /** A caller, or the part of Alcarta that acted on its own (`{ system: 'outbox' }`). */
  actor: Caller | { system: string };
  /** What the act was about: ids, states, `content_sha256` for decisions. Never a secret. */
  subject: Record<string, unknown>;
}

/** How an entry names who acted: ids only, never a token. */
export function auditActor(actor: Caller | { system: string }): AuditActor {
  if (!(actor instanceof Caller)) return actor;
  if (actor === OPERATOR) return { operator: true };
  if (!actor.principal) return { token_id: actor.tokenId };
  return {
    principal: actor.tokenId,
    issuer: actor.principal.issuer,
    subject: actor.principal.subject,
    email: actor.principal.email,
    client_id: actor.principal.clientId,
  };
}

/**
 * Appends to the audit trail inside the transaction of the act it records, so an entry exists
 * exactly when its act committed. The head row locked FOR UPDATE serializes appends across every
 * replica (the lock is PostgreSQL's, held until the act's commit or rollback); callers append last
 * in their transaction, so the lock is held briefly and always taken after the act's own row locks.
 */
@Injectable()
export class AuditLog {
  async append(manager: EntityManager, entry: NewAuditEntry): Promise<void> {
    const [head] = await manager.query<Array<{ seq: string; sha256: string }>>(
      `SELECT seq, sha256 FROM audit_head WHERE id = 1 FOR UPDATE`,
    );
    const chained = chainEntry(
      { seq: Number(head.seq), sha256: head.sha256 },
      {
        at: new Date().toISOString(),
        action: entry.action,
        actor: auditActor(entry.actor),
        client_address: currentClientAddress(),
        // As the jsonb column will give it back: what is hashed is what a verifier reads.
        subject: JSON.parse(JSON.stringify(entry.subject)) as Record<string, unknown>,
      },
    );
    await manager.query(
      `WITH head AS (UPDATE audit_head SET seq = $1, sha256 = $8 WHERE id = 1)
       INSERT INTO audit_log (seq, at, action, actor, client_address, subject, prev_sha256, sha256)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        chained.seq,
        chained.at,
        chained.action,
        JSON.stringify(chained.actor),
        chained.client_address,
        JSON.stringify(chained.subject),
        chained.prev_sha256,
        chained.sha256,
      ],
    );
  }
}
