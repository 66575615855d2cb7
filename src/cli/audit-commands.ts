import { createReadStream, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { Client } from 'pg';
import { AuditCheckpoint, AuditEntry, ChainVerdict, verifyChain } from '../audit/audit-chain';
import { CHECKPOINT_KEY_PURPOSE } from '../audit/audit-retention.housekeeping';
import { allEntriesAfter, auditHead, latestCheckpoint, RowQuery } from '../audit/audit-rows';
import { AppConfig } from '../config/app-config';
import { validateEnvironment } from '../config/environment';
import { LocalDatabase, openEmbeddedPostgres } from '../database/embedded-postgres';
import { SecretBox } from '../secrets/secret-box';
import { embeddedSecretsKeySettings } from '../secrets/secrets-key-file';

export type AuditCommand =
  { name: 'audit verify'; file: string | null } | { name: 'audit export'; since: number; output: string | null };

/**
 * `audit verify` checks the whole chain in the database (or in an export file) and names the first
 * broken entry; `audit export` writes entries as NDJSON, the checkpoint first when the export
 * starts at the beginning (docs/audit.md). Both read in one REPEATABLE READ snapshot, on a plain
 * `pg` connection: a prune or appends running meanwhile do not show half-done.
 */
export async function executeAudit(command: AuditCommand): Promise<number> {
  let embedded: LocalDatabase | undefined;
  try {
    const base = new AppConfig(validateEnvironment(process.env));
    const config = new AppConfig(validateEnvironment({ ...process.env, ...(await embeddedSecretsKeySettings(base)) }));
    const keys = new SecretBox(config).derivedKeys(CHECKPOINT_KEY_PURPOSE);
    if (command.name === 'audit verify' && command.file) return report(await verifyFile(command.file, keys));
    embedded = config.databaseUrl ? undefined : await openEmbeddedPostgres(config.dataDir, { persistent: true });
    const client = new Client({ connectionString: embedded?.url ?? config.databaseUrl, application_name: 'alcarta' });
    await client.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const query: RowQuery = async (sql, params) => (await client.query<Record<string, unknown>>(sql, params)).rows;
      const checkpoint = await latestCheckpoint(query);
      if (command.name === 'audit export') {
        const out = command.output ? createWriteStream(command.output) : process.stdout;
        const since = Math.max(command.since, checkpoint?.seq ?? 0);
        if (checkpoint && command.since <= checkpoint.seq) await writeLine(out, { checkpoint });
        for await (const entry of allEntriesAfter(query, since)) await writeLine(out, entry);
        if (out !== process.stdout) await new Promise<void>((resolve) => (out as Writable).end(resolve));
        return 0;
      }
      const head = await auditHead(query);
      let last: { seq: number; sha256: string } | undefined = checkpoint;
      const entries = (async function* () {
        for await (const entry of allEntriesAfter(query, checkpoint?.seq ?? 0)) {
          last = entry;
          yield entry;
        }
      })();
      const verdict = await verifyChain(entries, { checkpoint, keys });
      if (verdict.ok && (last?.seq ?? 0) !== head.seq) {
        return report({
          ok: false,
          seq: (last?.seq ?? 0) + 1,
          problem: `entries up to ${head.seq} were appended; the log ends at ${last?.seq ?? 0} (entries deleted)`,
        });
      }
      return report(verdict);
    } finally {
      await client.end();
    }
  } catch (err) {
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await embedded?.close();
  }
}

/** An export file: an optional checkpoint line, then entries. Without a checkpoint, a file that starts later than entry 1 is checked from its first entry. */
async function verifyFile(path: string, keys: Array<{ id: string; bytes: Buffer }>): Promise<ChainVerdict> {
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity })[Symbol.asyncIterator]();
  let first = await lines.next();
  let checkpoint: AuditCheckpoint | undefined;
  if (!first.done && first.value.trim().startsWith('{"checkpoint"')) {
    checkpoint = (JSON.parse(first.value) as { checkpoint: AuditCheckpoint }).checkpoint;
    first = await lines.next();
  }
  const entries = (async function* () {
    for (let line = first; !line.done; line = await lines.next()) {
      if (line.value.trim() !== '') yield JSON.parse(line.value) as AuditEntry;
    }
  })();
  const startsAtOne = !checkpoint;
  return verifyChain(entries, { checkpoint, keys, anchored: startsAtOne });
}

function report(verdict: ChainVerdict): number {
  if (verdict.ok) {
    process.stdout.write(
      verdict.entries === 0
        ? 'ok: no entries to check\n'
        : `ok: ${verdict.entries} entries verified (${verdict.first}..${verdict.last})\n`,
    );
    return 0;
  }
  process.stdout.write(`broken at entry ${verdict.seq}: ${verdict.problem}\n`);
  return 1;
}

async function writeLine(out: NodeJS.WritableStream, value: unknown): Promise<void> {
  if (!out.write(`${JSON.stringify(value)}\n`)) await once(out, 'drain');
}
