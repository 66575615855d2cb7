import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, TestDatabase } from '../support/database';
import { metricValue } from '../support/metrics';
import { RestClient } from '../support/rest';
import { RawSmtp } from '../support/smtp';
import { freePort, imageAllocatorEnv, spawnServer, SpawnedServer } from '../support/spawned-server';
import { createMailbox, randomSecret } from '../support/test-server';
import { waitFor } from '../support/wait-for';

const MIB = 1024 * 1024;
/** The Helm chart's default memory limit of a replica (resources.limits.memory). */
const MEMORY_LIMIT = 512 * MIB;
/** "Near its baseline": what the process may keep once the senders are gone (heap grown, allocator caches). */
const NEAR_BASELINE = 64 * MIB;
const SENDERS = 40;
const MESSAGE_BYTES = 24 * MIB;

/** The resident memory of process `pid` (VmRSS), in bytes. */
async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) * 1024;
}

/**
 * A plain-text message of about `bytes` from sender `tag`: blocks of 100-byte lines, each block
 * numbered, so a message stored out of order or cut differs. `lf` gives the body as the parser
 * stores it (LF line ends) for the digest of what must be stored.
 */
function bulkMessage(tag: string, bytes: number) {
  const header = `From: sender-${tag}@bulk.test\r\nSubject: bulk ${tag}\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n`;
  const line = `${tag} ${'abcdefghijklmnopqrstuvwxyz'.repeat(4)}`.slice(0, 98);
  const template = (eol: string) => `#000000 ${line.slice(8)}${eol}${`${line}${eol}`.repeat(639)}`;
  const blocks = Math.floor(bytes / 64_000);
  const block = (eol: string, i: number) => {
    const buffer = Buffer.from(template(eol));
    buffer.write(String(i).padStart(6, '0'), 1);
    return buffer;
  };
  const storedDigest = createHash('md5');
  for (let i = 0; i < blocks; i++) storedDigest.update(block('\n', i));
  return {
    tag,
    storedLength: blocks * 64_000 - blocks * 640,
    storedMd5: storedDigest.digest('hex'),
    *chunks(): Generator<Buffer> {
      yield Buffer.from(header);
      for (let i = 0; i < blocks; i++) yield block('\r\n', i);
      yield Buffer.from('.\r\n');
    },
  };
}

/**
 * Bounded memory under hostile SMTP senders: forty unauthenticated senders push 24 MiB each at
 * once into a real server process with default settings. Its memory stays under the chart's limit,
 * the messages beyond the budget of bytes in flight get 452 4.3.1 (the senders retry later), those
 * accepted are stored intact, and the memory goes back near where it was.
 */
describe('inbound SMTP memory under forty concurrent 24 MiB messages', () => {
  let db: TestDatabase;
  let server: SpawnedServer;
  let smtpPort: number;
  let mailboxId: string;
  let address: string;

  before(async () => {
    db = await createTestDatabase();
    const adminToken = randomSecret();
    smtpPort = await freePort();
    const allocator = imageAllocatorEnv();
    assert.ok(Object.keys(allocator).length > 0, 'the image sets the allocator up');
    // As the container image runs it (see the Dockerfile): the build, not the source runner (whose
    // compiler adds its own memory), with the image's allocator and the chart's other defaults.
    server = await spawnServer(
      {
        ...allocator,
        DATABASE_URL: db.url,
        ALCARTA_BOOTSTRAP_TOKEN: adminToken,
        ALCARTA_SMTP_PORT: String(smtpPort),
        ALCARTA_LOG_LEVEL: 'warn',
      },
      { build: true },
    );
    address = `bulk-${process.pid}@example.com`;
    mailboxId = await createMailbox(new RestClient(server.url, adminToken), address);
  });

  after(async () => {
    await server?.stop();
    await db?.drop();
  });

  /** Sends one message over a raw session; resolves with the final reply. */
  const send = async (message: ReturnType<typeof bulkMessage>): Promise<string> => {
    const smtp = await RawSmtp.open(smtpPort);
    try {
      await smtp.reply(60_000);
      for (const command of ['EHLO bulk.test', `MAIL FROM:<sender-${message.tag}@bulk.test>`, `RCPT TO:<${address}>`]) {
        const reply = await smtp.command(command);
        if (!reply.startsWith('250')) return reply;
      }
      const go = await smtp.command('DATA');
      if (!go.startsWith('354')) return go;
      await smtp.stream(message.chunks());
      return await smtp.reply(120_000);
    } finally {
      smtp.destroy();
    }
  };

  it('stays under 512 MiB, refuses what exceeds the budget with 452 4.3.1, stores the rest intact', async (t) => {
    // A first message loads everything a delivery uses; then the baseline.
    assert.match(await send(bulkMessage('warmup', 64_000)), /^250 /);
    const baseline = await rssOf(server.pid);

    const messages = Array.from({ length: SENDERS }, (_, i) =>
      bulkMessage(`s${String(i).padStart(2, '0')}`, MESSAGE_BYTES),
    );
    let peak = baseline;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await rssOf(server.pid));
        // Past the limit a container would have been killed: no need to go on.
        if (peak > MEMORY_LIMIT) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const started = Date.now();
    const replies = await Promise.race([
      Promise.all(messages.map((m) => send(m))),
      sampler.then(() => {
        throw new Error(`RSS reached ${(peak / MIB).toFixed(0)} MiB (baseline ${(baseline / MIB).toFixed(0)} MiB)`);
      }),
    ]);
    sampling = false;
    await sampler;
    const seconds = (Date.now() - started) / 1000;
    t.diagnostic(
      `baseline ${(baseline / MIB).toFixed(0)} MiB, peak ${(peak / MIB).toFixed(0)} MiB, ${seconds.toFixed(1)} s, ` +
        `${replies.filter((r) => r.startsWith('250')).length} accepted`,
    );
    assert.ok(peak < MEMORY_LIMIT, `peak RSS ${(peak / MIB).toFixed(0)} MiB`);

    const accepted = messages.filter((_, i) => replies[i].startsWith('250 '));
    const refused = replies.filter((r) => !r.startsWith('250 '));
    assert.ok(accepted.length >= 1, `some messages fit the budget: ${replies.join(' | ')}`);
    assert.ok(refused.length >= 1, 'forty times 24 MiB do not fit the default 64 MiB');
    for (const reply of refused) assert.match(reply, /^452 4\.3\.1 /);
    assert.equal(
      await metricValue(server.url, 'alcarta_smtp_messages_total', { outcome: 'refused', reason: 'server_busy' }),
      refused.length,
    );

    const stored = await db.query<{ subject: string; length: number; md5: string }>(
      `SELECT subject, length(text_body) AS length, md5(text_body) AS md5 FROM messages
        WHERE mailbox_id = $1 AND subject <> 'bulk warmup' ORDER BY subject`,
      [mailboxId],
    );
    assert.deepEqual(
      stored,
      accepted.map((m) => ({ subject: `bulk ${m.tag}`, length: m.storedLength, md5: m.storedMd5 })),
    );

    await waitFor('the bytes in flight to go back to 0', async () => {
      return (await metricValue(server.url, 'alcarta_smtp_bytes_in_flight')) === 0;
    });
    let settled = peak;
    await waitFor(
      `RSS to return within ${NEAR_BASELINE / MIB} MiB of the baseline (${(baseline / MIB).toFixed(0)} MiB)`,
      async () => (settled = await rssOf(server.pid)) <= baseline + NEAR_BASELINE,
      { timeoutMs: 60_000, intervalMs: 250 },
    ).finally(() => t.diagnostic(`RSS afterwards ${(settled / MIB).toFixed(0)} MiB`));
  });
});
