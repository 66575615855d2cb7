import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ApprovalService } from '#app/approvals/approval.service.js';
import { AuditRetentionHousekeeping } from '#app/audit/audit-retention.housekeeping.js';
import { TokenService } from '#app/auth/token.service.js';
import { AppConfig } from '#app/config/app-config.js';
import { ConsoleSessionService } from '#app/console/console-session.service.js';
import { runCliWith } from '../support/cli';
import { callOk, connectMcp } from '../support/mcp';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

type Entry = {
  seq: number;
  action: string;
  actor: Record<string, unknown>;
  client_address: string | null;
  subject: Record<string, unknown>;
  sha256: string;
};

/**
 * The audit trail (docs/audit.md): acts append entries naming who and from where, `GET /v1/audit`
 * pages them as NDJSON, `audit verify` accepts the chain and names a row edited by hand, an export
 * verifies, concurrent appends keep one chain, and pruning leaves a signed checkpoint.
 */
describe('audit trail', () => {
  const secretsKey = randomBytes(32).toString('base64');
  let server: TestServer;
  let dir: string;
  const cli = (...args: string[]) => runCliWith({ env: { ALCARTA_SECRETS_KEY: secretsKey } }, server.db.url, ...args);

  async function page(since: number, limit: number, token = server.adminToken) {
    const res = await fetch(`${server.url}/v1/audit?since=${since}&limit=${limit}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const text = await res.text();
    return {
      status: res.status,
      cursor: res.headers.get('alcarta-audit-cursor'),
      type: res.headers.get('content-type'),
      entries:
        res.status === 200
          ? text
              .split('\n')
              .filter(Boolean)
              .map((l) => JSON.parse(l) as Entry)
          : [],
    };
  }

  async function all(): Promise<Entry[]> {
    const entries: Entry[] = [];
    for (let since = 0; ;) {
      const next = await page(since, 7);
      entries.push(...next.entries);
      if (next.entries.length === 0) return entries;
      since = Number(next.cursor);
    }
  }

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: secretsKey } });
    dir = await mkdtemp(join(tmpdir(), 'alcarta-audit-'));
  });

  after(async () => {
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('records acts with who and the client address, and pages them as NDJSON with a cursor', async () => {
    const mailboxId = await createMailbox(server.admin);
    const agentToken = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [mailboxId] });
    const deciderToken = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailboxId] });
    const agent = (await server.running.app.get(TokenService).authenticate(agentToken.secret))!;
    const approvals = server.running.app.get(ApprovalService);
    const created = await approvals.requestApproval(agent, { mailboxId, title: 'Pay invoice 42' });
    const decided = await server.admin
      .withToken(deciderToken.secret)
      .post(`/v1/requests/${created.request_id}/approve`, {});
    assert.equal(decided.status, 200, JSON.stringify(decided.body));
    assert.equal((await server.admin.delete(`/v1/tokens/${agentToken.id}`)).status, 204);
    const grant = await server.admin.post('/v1/grants', { principal: 'group:auditors', mailboxes: [mailboxId] });
    assert.equal((await server.admin.delete(`/v1/grants/${grant.body.grant_id}`)).status, 204);
    assert.equal((await server.admin.patch(`/v1/mailboxes/${mailboxId}`, { name: 'Invoices' })).status, 200);
    assert.equal((await server.running.app.get(ConsoleSessionService).signInWithToken(deciderToken.secret)).ok, true);

    const entries = await all();
    assert.deepEqual(
      entries.map((e) => e.seq),
      entries.map((_, i) => i + 1),
      'paging skipped or repeated nothing',
    );
    const byAction = (action: string) => entries.filter((e) => e.action === action);
    const mailbox = byAction('mailbox_created').find((e) => e.subject.mailbox_id === mailboxId)!;
    assert.equal(mailbox.client_address, '127.0.0.1');
    assert.ok(mailbox.actor.token_id, 'the bootstrap admin token acted');
    assert.deepEqual(
      byAction('token_created')
        .map((e) => e.subject.token_id)
        .filter((id) => id === agentToken.id || id === deciderToken.id),
      [agentToken.id, deciderToken.id],
    );
    assert.deepEqual(byAction('token_created')[0].actor, { operator: true }, 'the bootstrap token, by the operator');
    const requestCreated = byAction('request_created')[0];
    assert.deepEqual(requestCreated.actor, { token_id: agentToken.id });
    const approved = byAction('request_approved')[0];
    assert.deepEqual(approved.actor, { token_id: deciderToken.id });
    assert.equal(approved.client_address, '127.0.0.1');
    assert.equal(approved.subject.request_id, created.request_id);
    assert.match(approved.subject.content_sha256 as string, /^[0-9a-f]{64}$/);
    assert.deepEqual(byAction('token_revoked')[0].subject, { token_id: agentToken.id });
    assert.deepEqual(
      [...byAction('grant_created'), ...byAction('grant_revoked')].map((e) => [e.subject.grant_id, e.client_address]),
      [
        [grant.body.grant_id, '127.0.0.1'],
        [grant.body.grant_id, '127.0.0.1'],
      ],
    );
    assert.deepEqual(byAction('mailbox_updated')[0].subject, {
      mailbox_id: mailboxId,
      renamed: true,
      source: 'unchanged',
    });
    const signIn = byAction('console_signed_in')[0];
    assert.deepEqual([signIn.actor, signIn.client_address], [{ token_id: deciderToken.id }, null]);

    const first = await page(0, 2);
    assert.equal(first.type, 'application/x-ndjson; charset=utf-8');
    assert.equal(first.cursor, '2');
    const end = await page(entries.length, 10);
    assert.deepEqual([end.entries, end.cursor], [[], String(entries.length)]);
    assert.equal((await page(-1 as number, 1)).status, 400);
  });

  it('records a policy change, an agent asking over MCP from its address, and each approval under a quorum', async () => {
    const mailboxId = await createMailbox(server.admin);
    const agentToken = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [mailboxId] });
    const [ann, bob] = await Promise.all([
      createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailboxId] }),
      createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailboxId] }),
    ]);
    const policy = await server.admin.put(`/v1/mailboxes/${mailboxId}/policy`, {
      approvers: [ann.id, bob.id],
      quorum: 2,
    });
    assert.equal(policy.status, 200, JSON.stringify(policy.body));
    const agent = await connectMcp(server.url, agentToken.secret);
    try {
      const { request_id } = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'Wire 10k' });
      const approve = (token: string) =>
        server.admin.withToken(token).post(`/v1/requests/${request_id}/approve`, { reason: 'checked' });
      assert.equal((await approve(ann.secret)).status, 200);
      assert.equal((await approve(bob.secret)).status, 200);
    } finally {
      await agent.close();
    }

    const entries = (await all()).filter((e) => e.subject.mailbox_id === mailboxId);
    assert.deepEqual(
      entries.map((e) => e.action),
      ['mailbox_created', 'policy_changed', 'request_created', 'request_approval_recorded', 'request_approved'],
    );
    const [, changed, created, recorded, approved] = entries;
    assert.deepEqual((changed.subject.policy as Record<string, unknown>).approvers, [ann.id, bob.id]);
    assert.deepEqual([created.actor, created.client_address], [{ token_id: agentToken.id }, '127.0.0.1']);
    assert.deepEqual(
      [recorded.actor, recorded.subject.approvals, recorded.subject.quorum, recorded.subject.reason],
      [{ token_id: ann.id }, 1, 2, 'checked'],
    );
    assert.deepEqual([approved.actor, approved.subject.decided_by], [{ token_id: bob.id }, bob.id]);
    assert.equal(recorded.subject.content_sha256, approved.subject.content_sha256);
    const verified = await cli('audit', 'verify');
    assert.equal(verified.code, 0, verified.stderr);
  });

  it('is for admins bound to every mailbox (403 otherwise)', async () => {
    const mailboxId = await createMailbox(server.admin);
    const reader = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: ['*'] });
    const boundAdmin = await createToken(server.admin, { scopes: ['admin'], mailboxes: [mailboxId] });
    assert.equal((await page(0, 1, reader.secret)).status, 403);
    assert.equal((await page(0, 1, boundAdmin.secret)).status, 403);
  });

  it('keeps one chain under concurrent appends, verified by the CLI', async () => {
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        server.admin.post('/v1/tokens', { name: `concurrent ${i}`, scopes: ['mail:read'], mailboxes: ['*'] }),
      ),
    );
    const verified = await cli('audit', 'verify');
    assert.equal(verified.code, 0, verified.stdout + verified.stderr);
    assert.match(verified.stdout, /^ok: \d+ entries verified/);
  });

  it('exports entries that verify, and names a row edited by hand', async () => {
    const file = join(dir, 'export.ndjson');
    const exported = await cli('audit', 'export', '--output', file);
    assert.equal(exported.code, 0, exported.stderr);
    const lines = (await readFile(file, 'utf8')).trim().split('\n');
    assert.equal(lines.length, (await all()).length);
    const fromFile = await cli('audit', 'verify', '--file', file);
    assert.equal(fromFile.code, 0, fromFile.stdout + fromFile.stderr);

    await server.db.query(`UPDATE audit_log SET client_address = '203.0.113.9' WHERE seq = 3`);
    const broken = await cli('audit', 'verify');
    assert.equal(broken.code, 1);
    assert.match(broken.stdout, /^broken at entry 3: the entry does not match its sha256/);

    const original = JSON.parse(lines[2]) as Entry;
    await server.db.query(`UPDATE audit_log SET client_address = $1 WHERE seq = 3`, [original.client_address]);
    assert.equal((await cli('audit', 'verify')).code, 0, 'the restored row verifies again');
  });

  it('pruning keeps a signed checkpoint that what remains links to; a forged checkpoint is named', async () => {
    const cutoff = new Date();
    const later = [
      await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] }),
      await createToken(server.admin, { scopes: ['mail:read'], mailboxes: ['*'] }),
    ];
    const retention = server.running.app.get(AppConfig).auditRetentionMs;
    const pruned = await server.running.app
      .get(AuditRetentionHousekeeping)
      .prune(new Date(cutoff.getTime() + retention));
    assert.ok(pruned > 0);
    const [checkpoint] = await server.db.query<{ seq: string; sha256: string }>(
      `SELECT seq, sha256 FROM audit_checkpoints`,
    );
    const left = await all();
    assert.equal(left[0].seq, Number(checkpoint.seq) + 1, 'the first entry left follows the checkpoint');
    assert.deepEqual(
      left.filter((e) => e.action === 'token_created').map((e) => e.subject.token_id),
      later.map((t) => t.id),
    );
    const verified = await cli('audit', 'verify');
    assert.equal(verified.code, 0, verified.stdout + verified.stderr);
    assert.match(verified.stdout, new RegExp(`^ok: ${left.length} entries verified \\(${left[0].seq}\\.\\.`));

    const file = join(dir, 'pruned.ndjson');
    assert.equal((await cli('audit', 'export', '--output', file)).code, 0);
    assert.match((await readFile(file, 'utf8')).split('\n')[0], /^\{"checkpoint":\{"seq":/);
    assert.equal((await cli('audit', 'verify', '--file', file)).code, 0);

    // A checkpoint moved forward to hide an entry cannot be signed without the key.
    await server.db.query(`UPDATE audit_checkpoints SET seq = seq + 1, sha256 = $1`, [left[0].sha256]);
    const forged = await cli('audit', 'verify');
    assert.equal(forged.code, 1);
    assert.equal(
      forged.stdout.trim(),
      `broken at entry ${left[0].seq}: the checkpoint signature does not match (forged or altered checkpoint)`,
    );
    const withoutKey = await runCliWith({}, server.db.url, 'audit', 'verify', '--file', file);
    assert.equal(withoutKey.code, 1, 'a checkpoint is not taken on trust without the key');
  });
});
