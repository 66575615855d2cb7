import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, TestDatabase } from '../support/database';
import { rawMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { scrubbed, spawnServer, SpawnedServer } from '../support/spawned-server';
import { randomSecret } from '../support/test-server';

/** Any bearer secret or websocket ticket, as the server would mask it (and a bit more). */
const ANY_SECRET = /(alc|wst)(_|%5F)[0-9A-Za-z]{8,}/gi;

function randomTicket(): string {
  const chars = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  return `wst_${[...randomBytes(43)].map((b) => chars[b % 62]).join('')}`;
}

/**
 * "Logs hold no payloads and no secrets" (docs/operators.md, "Limits and hardening"), on a real
 * process and its real stdout: secrets sent anywhere in a request (path, query, headers, body, a
 * database error message) are masked in every line, and a failed query is logged with its SQL and
 * error code but without its parameters.
 */
describe('logs', () => {
  let db: TestDatabase;
  let server: SpawnedServer;
  let admin: RestClient;
  const adminSecret = randomSecret();

  before(async () => {
    db = await createTestDatabase();
    server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_BOOTSTRAP_TOKEN: adminSecret,
      ALCARTA_LOG_LEVEL: 'info',
    });
    admin = new RestClient(server.url, adminSecret);
  });

  after(async () => {
    await server?.stop('SIGTERM');
    await db?.drop();
  });

  const logLines = () =>
    server
      .stdout()
      .split('\n')
      .filter((line) => line.trim() !== '');

  it('masks every alc_/wst_ secret anywhere in a line: paths, queries, headers, bodies, error messages', async () => {
    const inPath = randomSecret();
    const ticketInPath = randomTicket();
    const inQuery = randomSecret();
    const inHeader = randomSecret();
    const inBody = randomSecret();
    const encoded = randomSecret();

    assert.equal((await admin.delete(`/v1/tokens/${inPath}`)).status, 404);
    assert.equal((await admin.get(`/v1/waits/${ticketInPath}/socket`)).status, 404);
    assert.equal((await admin.get(`/v1/mailboxes?token=${inQuery}&t=x${encoded.replace('_', '%5F')}`)).status, 200);
    const headers = await fetch(`${server.url}/v1/mailboxes`, {
      headers: { authorization: `Bearer ${inHeader}`, 'user-agent': `agent ${inHeader}`, 'x-ticket': ticketInPath },
    });
    assert.equal(headers.status, 401);
    await headers.text();
    const body = await admin.post('/v1/tokens', { name: inBody, scopes: ['nonsense'], mailboxes: [inBody] });
    assert.equal(body.status, 400);
    assert.equal((await rawMcp(server.url, inHeader, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).status, 401);

    // An error raised by PostgreSQL whose message names the secret (a constraint named after it),
    // logged by the exception filter through Nest's logger.
    const mailboxId = (await admin.post('/v1/mailboxes', { address: 'logs-secret@example.com' })).body
      .mailbox_id as string;
    const constraint = randomSecret().slice(0, 47);
    await db.query(`ALTER TABLE messages ADD CONSTRAINT "${constraint}" CHECK (subject <> 'secret-constraint')`);
    try {
      const failed = await admin.post(`/v1/mailboxes/${mailboxId}/messages`, {
        from: 'a@example.org',
        to: ['logs-secret@example.com'],
        subject: 'secret-constraint',
        text: 'x',
      });
      assert.equal(failed.status, 500);
    } finally {
      await db.query(`ALTER TABLE messages DROP CONSTRAINT "${constraint}"`);
    }

    const out = server.stdout();
    for (const secret of [adminSecret, inPath, ticketInPath, inQuery, inHeader, inBody, encoded, constraint]) {
      assert.ok(!out.includes(secret.slice(4, 20)), `a secret reached the log:\n${scrubbed(out)}`);
    }
    assert.deepEqual(out.match(ANY_SECRET) ?? [], [], 'no secret-shaped string in any line');
    assert.ok(
      logLines().some((l) => l.includes('"/v1/tokens/alc_[REDACTED]"')),
      'the request line of the DELETE is there, with the secret masked',
    );
    assert.ok(
      logLines().some((l) => l.includes('violates check constraint \\"alc_[REDACTED]\\"')),
      "PostgreSQL's error message is logged, with the secret masked",
    );
  });

  it('logs a failed query with its SQL text and error code, never its parameters or the request body', async () => {
    const mailboxId = (await admin.post('/v1/mailboxes', { address: 'logs-payload@example.com' })).body
      .mailbox_id as string;
    // A query that fails in PostgreSQL whatever the application checks beforehand.
    await db.query(`ALTER TABLE messages ADD CONSTRAINT reject_for_test CHECK (subject <> 'explode')`);
    const marker = `PAYLOAD-${randomBytes(8).toString('hex')}`;
    try {
      const res = await admin.post(`/v1/mailboxes/${mailboxId}/messages`, {
        from: `${marker}@example.org`,
        to: ['logs-payload@example.com'],
        subject: 'explode',
        text: `${marker} ${'mail body '.repeat(500_000)}`,
      });
      assert.equal(res.status, 500);
    } finally {
      await db.query('ALTER TABLE messages DROP CONSTRAINT reject_for_test');
    }
    const lines = logLines();
    const failure = lines.find((l) => l.includes('reject_for_test'));
    assert.ok(failure, `the failed query is logged:\n${scrubbed(lines.join('\n')).slice(-4000)}`);
    const entry = JSON.parse(failure) as { err?: { code?: string; query?: string; cause?: { code?: string } } };
    const err = entry.err!;
    assert.equal(err.code ?? err.cause?.code, '23514', 'the error code (check_violation) is kept');
    assert.match(err.query ?? '', /INSERT INTO "messages"/, 'the SQL text is kept');
    for (const line of lines) {
      assert.ok(!line.includes(marker), `the payload reached the log: ${line.slice(0, 2000)}`);
      assert.ok(line.length < 16_384, `a log line of ${line.length} characters: ${line.slice(0, 2000)}`);
    }
  });
});
