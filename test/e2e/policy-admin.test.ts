import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { runCli, runCliWith } from '../support/cli';
import { callError, callOk, connectMcp } from '../support/mcp';
import { RestClient } from '../support/rest';
import { BAD_POLICIES, GOOD_POLICY } from '../support/policies';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

/**
 * docs/policies.md, the administration of a policy and its recipient rules end to end: PUT/GET over
 * REST and `alcarta mailboxes policy get|set` on the same database, every refused policy answered
 * with the field it is about and nothing changed, another tenant's mailbox unknown, and the recipient
 * rules applied to an agent's send_email over MCP (official SDK).
 */
describe('mailbox policies: REST, CLI and recipient rules', () => {
  let server: TestServer;
  let mailbox: string;
  let agent: Client;

  const policyPath = (id: string) => `/v1/mailboxes/${id}/policy`;
  const put = (id: string, body: unknown, client: RestClient = server.admin) =>
    client.request('PUT', policyPath(id), body);
  const stored = async (id: string) => {
    const res = await server.admin.get(policyPath(id));
    assert.equal(res.status, 200);
    const { updated_at: _updated, ...policy } = res.body as Record<string, unknown>;
    return policy;
  };
  /** The requests stored for a mailbox, whatever any token may see. */
  const requestsOf = (id: string) => server.db.query('SELECT id FROM approval_requests WHERE mailbox_id = $1', [id]);

  before(async () => {
    server = await startTestServer();
    mailbox = await createMailbox(server.admin);
    const agentToken = await createToken(server.admin, {
      scopes: ['mail:send', 'approvals:read'],
      mailboxes: ['*'],
    });
    agent = await connectMcp(server.url, agentToken.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  it('a mailbox without a policy shows the defaults; PUT sets it whole and GET shows it', async () => {
    assert.deepEqual(await stored(mailbox), {
      mailbox_id: mailbox,
      approvers: null,
      quorum: 1,
      expires_after_seconds: null,
      escalate_after_seconds: null,
      escalate_to: [],
      recipients: { allow: [], block: [], auto_approve: false },
    });
    const res = await put(mailbox, GOOD_POLICY);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(await stored(mailbox), { mailbox_id: mailbox, ...GOOD_POLICY });
  });

  it('refuses every bad policy over REST with the field it is about, and changes nothing', async () => {
    const before = await stored(mailbox);
    for (const bad of BAD_POLICIES) {
      const res = await put(mailbox, bad.body);
      assert.equal(res.status, 400, `${bad.what}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.reason, bad.reason, `${bad.what}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.field, bad.field, `${bad.what}: ${JSON.stringify(res.body)}`);
      assert.deepEqual(await stored(mailbox), before, `${bad.what} changed nothing`);
    }
  });

  it("another tenant's mailbox is unknown to a mailbox-bound admin, for GET and PUT", async () => {
    const own = await createMailbox(server.admin);
    const tenant = await createToken(server.admin, { scopes: ['admin'], mailboxes: [own] });
    const tenantAdmin = server.admin.withToken(tenant.secret);
    assert.equal((await tenantAdmin.get(policyPath(own))).status, 200);
    const before = await stored(mailbox);
    const read = await tenantAdmin.get(policyPath(mailbox));
    assert.equal(read.status, 404);
    const write = await put(mailbox, { quorum: 1 }, tenantAdmin);
    assert.equal(write.status, 404);
    assert.equal(write.body.reason, 'mailbox_not_found', JSON.stringify(write.body));
    assert.deepEqual(await stored(mailbox), before);
  });

  it('alcarta mailboxes policy get|set: reads and sets the policy; --json prints the GET body', async () => {
    const box = await createMailbox(server.admin);
    const policy = { approvers: ['tok_cli'], quorum: 1, recipients: { allow: ['ops@example.com'] } };
    const set = await runCliWith(
      { stdin: JSON.stringify(policy) },
      server.db.url,
      'mailboxes',
      'policy',
      'set',
      box,
      '--file',
      '-',
      '--json',
    );
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout).approvers, ['tok_cli']);
    const rest = (await server.admin.get(policyPath(box))).body;
    const got = await runCli(server.db.url, 'mailboxes', 'policy', 'get', box, '--json');
    assert.equal(got.code, 0, got.stderr);
    assert.deepEqual(JSON.parse(got.stdout), rest);
    const text = await runCli(server.db.url, 'mailboxes', 'policy', 'get', box);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /approvers: +tok_cli/);
    assert.match(text.stdout, /allow: +ops@example\.com\n/);
  });

  it('alcarta mailboxes policy set refuses a bad policy of each kind with the server’s error naming the field, changing nothing', async () => {
    const before = await stored(mailbox);
    // Each kind of refusal once through a real CLI process (each takes seconds to start); the CLI
    // checks a file with the same code before it opens the database, and test/unit/cli-policy-input
    // runs every case of BAD_POLICIES through that check.
    const reasons = new Set<string>();
    const sample = BAD_POLICIES.filter(
      (bad) => (!reasons.has(bad.reason) && reasons.add(bad.reason)) || bad.what === 'a quorum above the approvers',
    );
    for (let i = 0; i < sample.length; i += 4) {
      await Promise.all(
        sample.slice(i, i + 4).map(async (bad) => {
          const res = await runCliWith(
            { stdin: JSON.stringify(bad.body) },
            server.db.url,
            'mailboxes',
            'policy',
            'set',
            mailbox,
            '--file',
            '-',
          );
          assert.equal(res.code, 1, `${bad.what}: ${res.stdout}`);
          assert.equal(res.stdout, '');
          assert.ok(
            res.stderr.includes(`invalid_request (${bad.reason})`) && res.stderr.includes(bad.field),
            `${bad.what}: ${res.stderr}`,
          );
        }),
      );
    }
    assert.deepEqual(await stored(mailbox), before, 'nothing changed');
    const notJson = await runCliWith(
      { stdin: '{nope' },
      server.db.url,
      'mailboxes',
      'policy',
      'set',
      mailbox,
      '--file',
      '-',
    );
    assert.equal(notJson.code, 2, notJson.stderr);
    assert.match(notJson.stderr, /--file: - is not JSON/);
    const unknown = await runCliWith(
      { stdin: '{}' },
      server.db.url,
      'mailboxes',
      'policy',
      'set',
      'mbx_unknown0000000000',
      '--file',
      '-',
    );
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /not_found \(mailbox_not_found\)/);
    assert.deepEqual(await stored(mailbox), before, 'nothing changed');
  });

  describe('recipient rules on send_email', () => {
    let box: string;
    const send = (to: string[], extra: Record<string, unknown> = {}) => ({
      mailbox_id: box,
      to,
      subject: 'Quarterly numbers',
      text: 'Attached.',
      ...extra,
    });

    before(async () => {
      box = await createMailbox(server.admin);
      const res = await put(box, {
        expires_after_seconds: 900,
        recipients: {
          allow: ['partner.example', 'friend@other.example'],
          block: ['rival.example', 'leak@press.example'],
          auto_approve: true,
        },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    });

    it('a blocked recipient (address, domain, subdomain) is a recipient_blocked tool error, and nothing is made', async () => {
      for (const to of [
        ['leak@press.example'],
        ['ceo@rival.example'],
        ['ops@eu.RIVAL.example', 'someone@partner.example'],
      ]) {
        const err = await callError(agent, 'send_email', send(to));
        assert.equal(err.reason, 'recipient_blocked', JSON.stringify(err));
        assert.deepEqual(err.recipients, [to[0]]);
      }
      const cc = await callError(agent, 'send_email', send(['a@partner.example'], { cc: ['x@rival.example'] }));
      assert.equal(cc.reason, 'recipient_blocked');
      assert.deepEqual(await requestsOf(box), [], 'no request was made');
      assert.deepEqual(await server.db.query('SELECT id FROM messages WHERE mailbox_id = $1', [box]), []);
    });

    it('all recipients allowed with auto_approve: approved at once by "policy", queued to the outbox', async () => {
      const created = await callOk(
        agent,
        'send_email',
        send(['a@partner.example', 'Friend@other.example'], { cc: ['b@sub.partner.example'] }),
      );
      assert.equal(created.state, 'approved');
      assert.equal(created.decided_by, 'policy');
      const request = await callOk(agent, 'get_request', { request_id: created.request_id });
      assert.equal(request.state, 'approved');
      assert.equal(request.decided_by, 'policy');
      assert.match(request.sent_message_id, /^msg_/);
      assert.ok(request.delivery, 'the approved email has a delivery in the outbox');
      const rows = await server.db.query<{ count: string }>(
        'SELECT count(*)::text AS count FROM outbound_deliveries WHERE message_id = $1',
        [request.sent_message_id],
      );
      assert.equal(rows[0].count, '1');
    });

    it('one recipient not on allow: pending, with the policy’s default expiry', async () => {
      const created = await callOk(agent, 'send_email', send(['a@partner.example', 'stranger@elsewhere.example']));
      assert.equal(created.state, 'pending');
      assert.equal(created.decided_by, undefined);
      const request = await callOk(agent, 'get_request', { request_id: created.request_id });
      const lifetime = (Date.parse(request.expires_at) - Date.parse(request.created_at)) / 1000;
      assert.equal(lifetime, 900, 'expires_after_seconds of the policy');
      const asked = await callOk(
        agent,
        'send_email',
        send(['stranger@elsewhere.example'], { expires_in_seconds: 120 }),
      );
      const own = await callOk(agent, 'get_request', { request_id: asked.request_id });
      assert.equal((Date.parse(own.expires_at) - Date.parse(own.created_at)) / 1000, 120, 'an asked expiry wins');
    });
  });
});
