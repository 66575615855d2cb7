import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import canonicalize from 'canonicalize';

/** The `prev_sha256` of the very first entry: 64 zeros (no entry came before it). */
export const GENESIS_SHA256 = '0'.repeat(64);

/** Who did an act: a static token, an OAuth principal, the operator's CLI, or Alcarta itself. */
export type AuditActor =
  | { token_id: string }
  | { principal: string; subject: string; email: string | null; client_id: string | null; issuer: string }
  | { operator: true }
  | { system: string };

/** An entry as stored, served by `GET /v1/audit` and exported (docs/audit.md, "Entries"). */
export interface AuditEntry {
  seq: number;
  at: string;
  action: string;
  actor: AuditActor;
  client_address: string | null;
  subject: Record<string, unknown>;
  prev_sha256: string;
  sha256: string;
}

/**
 * What a prune leaves behind: the sequence number and hash of the last entry it deleted, signed,
 * so the first entry left still links to something nobody can forge without the key.
 */
export interface AuditCheckpoint {
  seq: number;
  sha256: string;
  pruned_at: string;
  key_id: string;
  signature: string;
}

/**
 * The JSON Canonicalization Scheme (RFC 8785) form of a value: object keys sorted, no whitespace,
 * numbers and strings as ECMAScript serializes them. Hashing the canonical form (not the bytes a
 * database or a JSON library happened to produce) makes the hash reproducible by any auditor.
 */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new Error('the value has no JSON form');
  return text;
}

/** SHA-256 (lower-case hex) of the canonical JSON of the entry without its own `sha256`. */
export function entrySha256(entry: Omit<AuditEntry, 'sha256'> & { sha256?: string }): string {
  const { sha256: _own, ...hashed } = entry;
  return createHash('sha256').update(canonicalJson(hashed), 'utf8').digest('hex');
}

/** The entry that follows `previous` (or the genesis when the log is empty), hashed. */
export function chainEntry(
  previous: { seq: number; sha256: string } | undefined,
  fields: Omit<AuditEntry, 'seq' | 'prev_sha256' | 'sha256'>,
): AuditEntry {
  const unhashed = {
    ...fields,
    seq: (previous?.seq ?? 0) + 1,
    prev_sha256: previous?.sha256 ?? GENESIS_SHA256,
  };
  return { ...unhashed, sha256: entrySha256(unhashed) };
}

/** The signature of a checkpoint: HMAC-SHA256 of the canonical JSON of its other fields. */
export function checkpointSignature(checkpoint: Omit<AuditCheckpoint, 'signature'>, key: Buffer): string {
  const { seq, sha256, pruned_at, key_id } = checkpoint;
  return createHmac('sha256', key).update(canonicalJson({ seq, sha256, pruned_at, key_id }), 'utf8').digest('hex');
}

/** A key that signs or checks checkpoints, named by `id` in the checkpoints it signed. */
export interface CheckpointKey {
  id: string;
  bytes: Buffer;
}

/** The first problem a verification found: `seq` names the entry (or the checkpoint's seq). */
export interface ChainBreak {
  seq: number;
  problem: string;
}

export type ChainVerdict =
  { ok: true; entries: number; first: number | null; last: number | null } | ({ ok: false } & ChainBreak);

/**
 * Checks a chain, entry by entry, in order: each entry's hash is that of its fields, its `seq`
 * follows the previous one, and its `prev_sha256` is the previous entry's hash. The first entry
 * links to the checkpoint when there is one (whose signature must check with one of `keys`), to the
 * genesis when the log was never pruned, or — for a partial export (`anchored: false`) — is taken
 * as it is. Streams: `entries` may be an async iterable over millions of rows.
 */
export async function verifyChain(
  entries: AsyncIterable<AuditEntry> | Iterable<AuditEntry>,
  options: { checkpoint?: AuditCheckpoint; keys?: readonly CheckpointKey[]; anchored?: boolean } = {},
): Promise<ChainVerdict> {
  const { checkpoint, keys = [], anchored = true } = options;
  let previous: { seq: number; sha256: string } | undefined;
  if (checkpoint) {
    const key = keys.find((candidate) => candidate.id === checkpoint.key_id);
    if (!key) {
      return {
        ok: false,
        seq: checkpoint.seq,
        problem: `the checkpoint is signed with key ${checkpoint.key_id}, which is not configured`,
      };
    }
    if (!sameHex(checkpointSignature(checkpoint, key.bytes), checkpoint.signature)) {
      return {
        ok: false,
        seq: checkpoint.seq,
        problem: 'the checkpoint signature does not match (forged or altered checkpoint)',
      };
    }
    previous = { seq: checkpoint.seq, sha256: checkpoint.sha256 };
  } else if (anchored) {
    previous = { seq: 0, sha256: GENESIS_SHA256 };
  }
  let count = 0;
  let first: number | null = null;
  for await (const entry of entries) {
    if (entrySha256(entry) !== entry.sha256) {
      return { ok: false, seq: entry.seq, problem: 'the entry does not match its sha256 (altered entry)' };
    }
    if (previous && entry.seq !== previous.seq + 1) {
      return {
        ok: false,
        seq: entry.seq,
        problem: `expected entry ${previous.seq + 1} here (entries missing or reordered)`,
      };
    }
    if (previous && entry.prev_sha256 !== previous.sha256) {
      return { ok: false, seq: entry.seq, problem: `prev_sha256 is not the sha256 of entry ${previous.seq}` };
    }
    first ??= entry.seq;
    previous = { seq: entry.seq, sha256: entry.sha256 };
    count++;
  }
  return { ok: true, entries: count, first, last: count > 0 ? previous!.seq : null };
}

function sameHex(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}
