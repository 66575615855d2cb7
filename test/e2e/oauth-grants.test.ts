import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { callOk, connectMcp } from '../support/mcp';
import { FakeAuthorizationServer, SigningKey, signingKey } from '../support/fake-authorization-server';
import { createMailbox, startTestServer, TestServer } from '../support/test-server';

/**
 * "Who and what" (docs/operators.md, "Identity providers"), "Binding" and decided_by with mailboxes
 * granted through `POST /v1/grants`. Needs the grants REST API and GrantService.mailboxesFor of the
 * grants branch: passes after the merge.
 */
describe('OAuth principals with granted mailboxes (docs/operators.md "Identity providers")', () => {
  let server: TestServer;
  const as = new FakeAuthorizationServer();
  let key: SigningKey;

  const token = (sub: string, claims: Record<string, unknown>) =>
    new SignJWT({ client_id: 'agent-client', ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid })
      .setIssuer(as.issuer)
      .setAudience(`${server.running.url}/mcp`)
      .setSubject(sub)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(key.privateKey);

  before(async () => {
    key = await signingKey('grants-key');
    await as.start();
    as.keys = [key];
    server = await startTestServer({ ownPublicUrl: true, env: { ALCARTA_OAUTH_ISSUER: as.issuer } });
  });

  after(async () => {
    await server?.close();
    await as.stop();
  });

  it('reaches mailboxes granted to its subject; a refreshed token reaches the same requests; decided_by is the email', async () => {
    const granted = await createMailbox(server.admin);
    await createMailbox(server.admin);
    const grant = await server.admin.post('/v1/grants', { principal: 'sub:agent-7', mailboxes: [granted] });
    assert.equal(grant.status, 201, JSON.stringify(grant.body));

    const agent = await connectMcp(server.url, await token('agent-7', { scope: 'mail:read approvals:read' }));
    let requestId: string;
    try {
      const listed = await callOk<{ mailboxes: Array<{ mailbox_id: string }> }>(agent, 'list_mailboxes');
      assert.deepEqual(
        listed.mailboxes.map((m) => m.mailbox_id),
        [granted],
      );
      ({ request_id: requestId } = await callOk<{ request_id: string }>(agent, 'request_approval', {
        mailbox_id: granted,
        title: 'Pay invoice 42',
      }));
    } finally {
      await agent.close();
    }

    const refreshed = await connectMcp(server.url, await token('agent-7', { scope: 'mail:read approvals:read' }));
    try {
      const seen = await callOk<{ request_id: string; state: string }>(refreshed, 'get_request', {
        request_id: requestId,
      });
      assert.equal(seen.state, 'pending');
    } finally {
      await refreshed.close();
    }

    await server.admin.post('/v1/grants', { principal: 'sub:approver-1', mailboxes: [granted] });
    const approver = server.admin.withToken(
      await token('approver-1', { scope: 'approvals:decide', email: 'approver@example.com' }),
    );
    const decided = await approver.post(`/v1/requests/${requestId}/approve`, {});
    assert.equal(decided.status, 200, JSON.stringify(decided.body));
    assert.equal(decided.body.decided_by, 'approver@example.com');
  });
});
