import { createHash } from 'node:crypto';
import { MigrationInterface, QueryRunner } from 'typeorm';

const BATCH = 1000;

interface StoredRequest {
  id: string;
  kind: string;
  mailbox_id: string;
  email: {
    from: string;
    to: string[];
    cc: string[];
    subject: string;
    text: string;
    html: string | null;
    in_reply_to_message_id: string | null;
  } | null;
  title: string;
  details: string | null;
}

/**
 * What is approved is what leaves: every request gets `content_sha256`, the hash of what it asks
 * (first form, `alcarta.request-content.v1`; this copy is frozen with the migration, the code's form
 * lives in src/approvals/request-content.ts), and a decision records the hash the person saw
 * (`decided_content_sha256`; requests decided before this are taken to have seen what they hold).
 * `sanitized` says what was removed from an email draft's HTML when it was requested: NULL for the
 * drafts stored before, which therefore cannot be approved. A failed delivery says why in `reason`.
 */
export class ApprovedContent1766400000000 implements MigrationInterface {
  name = 'ApprovedContent1766400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE approval_requests ADD COLUMN sanitized jsonb`);
    await q.query(`ALTER TABLE approval_requests ADD COLUMN content_sha256 text`);
    await q.query(`ALTER TABLE approval_requests ADD COLUMN decided_content_sha256 text`);
    for (;;) {
      const rows = (await q.query(
        `SELECT id, kind, mailbox_id, email, title, details FROM approval_requests
          WHERE content_sha256 IS NULL LIMIT ${BATCH}`,
      )) as StoredRequest[];
      if (rows.length === 0) break;
      const hashes = rows.map((r) => ({ id: r.id, hash: contentSha256V1(r) }));
      await q.query(
        `UPDATE approval_requests r SET content_sha256 = h.hash,
                decided_content_sha256 = CASE WHEN r.state IN ('approved', 'rejected') THEN h.hash END
           FROM jsonb_to_recordset($1::jsonb) AS h(id text, hash text)
          WHERE r.id = h.id`,
        [JSON.stringify(hashes)],
      );
    }
    await q.query(`ALTER TABLE approval_requests ALTER COLUMN content_sha256 SET NOT NULL`);
    await q.query(`ALTER TABLE outbound_deliveries ADD COLUMN reason text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE outbound_deliveries DROP COLUMN reason`);
    await q.query(`ALTER TABLE approval_requests DROP COLUMN decided_content_sha256`);
    await q.query(`ALTER TABLE approval_requests DROP COLUMN content_sha256`);
    await q.query(`ALTER TABLE approval_requests DROP COLUMN sanitized`);
  }
}

function contentSha256V1(r: StoredRequest): string {
  const e = r.email;
  const canonical = JSON.stringify([
    'alcarta.request-content.v1',
    r.kind,
    r.mailbox_id,
    e?.from ?? null,
    e?.to ?? [],
    e?.cc ?? [],
    e?.subject ?? null,
    e?.text ?? null,
    e?.html ?? null,
    e?.in_reply_to_message_id ?? null,
    r.title,
    r.details,
  ]);
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}
