import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodeJwt } from 'jose';
import { freePort } from '#app/common/net.js';
import { AGENT_CLIENT, IdentityProvider, PERSON_CLIENT, startIdentityProvider } from '../support/identity-provider';
import { callError, callOk, connectMcp } from '../support/mcp';
import { InMemorySignIn } from '../support/oauth-sign-in';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, ingest, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { postSignIn } from '../support/console';

/**
 * docs/operators.md "Identity providers" end to end, as an agent and a person meet it: the official
 * MCP SDK client starts without a token, follows the 401 to the RFC 9728 document, finds the
 * authorization server (a real oidc-provider), gets a JWT for the RFC 8707 resource `<public
 * URL>/mcp` and uses it — client credentials for the agent (the SDK's own
 * ClientCredentialsProvider), authorization code + PKCE for a person whose `groups` claim is
 * granted a mailbox. Only blocking ("poll") waits: websocket delivery, wait_id and tasks with
 * access tokens are not part of this yet.
 */

/** One HTTP exchange of the SDK client: `STATUS METHOD URL` (URL without query). */
type Exchange = string;

/** A fetch for the SDK transport that records every exchange it makes, discovery included. */
function recordingFetch(exchanges: Exchange[]): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    const url = new URL(input instanceof Request ? input.url : input);
    exchanges.push(`${res.status} ${init?.method ?? 'GET'} ${url.origin}${url.pathname}`);
    if (res.status === 401) exchanges.push(`WWW-Authenticate: ${res.headers.get('www-authenticate')}`);
    return res;
  };
}

/** Asserts that `expected` occur in `exchanges` in this order (other exchanges may come between). */
function assertInOrder(exchanges: Exchange[], expected: Exchange[]): void {
  let from = 0;
  for (const item of expected) {
    const at = exchanges.indexOf(item, from);
    assert.ok(at >= 0, `expected ${item} after position ${from} in:\n${exchanges.join('\n')}`);
    from = at + 1;
  }
}

describe('An agent and a person sign in with the MCP SDK through a real OpenID provider (docs/operators.md "Identity providers")', () => {
  let server: TestServer;
  let idp: IdentityProvider;
  let resource: string;
  let agentMailbox: string; // granted to client:agent only
  let opsMailbox: string; // granted to group:ops and to client:agent

  const mcpUrl = () => new URL('/mcp', server.url);
  const grant = async (principal: string, mailboxes: string[]) => {
    const res = await server.admin.post('/v1/grants', { principal, mailboxes });
    assert.equal(res.status, 201, JSON.stringify(res.body));
  };
  /** An MCP client of the agent that signs in by itself, as an agent would configure it. */
  const connectAgent = async (exchanges: Exchange[] = []) => {
    const authProvider = new ClientCredentialsProvider({
      clientId: AGENT_CLIENT.clientId,
      clientSecret: AGENT_CLIENT.clientSecret,
      // Needed: for client credentials the SDK asks for this scope only (not the RFC 9728 list).
      scope: AGENT_CLIENT.scope,
      expectedIssuer: idp.issuer,
    });
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(mcpUrl(), { authProvider, fetch: recordingFetch(exchanges) }),
    );
    return { client, authProvider };
  };

  before(async () => {
    const appUrl = `http://127.0.0.1:${await freePort()}`;
    resource = `${appUrl}/mcp`;
    idp = await startIdentityProvider({ resource });
    server = await startTestServer({
      env: { PORT: new URL(appUrl).port, ALCARTA_PUBLIC_URL: appUrl, ALCARTA_OAUTH_ISSUER: idp.issuer },
    });
    agentMailbox = await createMailbox(server.admin);
    opsMailbox = await createMailbox(server.admin);
    await grant(`client:${AGENT_CLIENT.clientId}`, [agentMailbox, opsMailbox]);
    await grant('group:ops', [opsMailbox]);
  });

  after(async () => {
    await server?.close();
    await idp?.close();
  });

  it('the agent discovers the provider from the 401, gets a client-credentials token for /mcp and blocks in email_await until mail arrives', async () => {
    const exchanges: Exchange[] = [];
    const tokenRequestsBefore = idp.requests.filter((r) => r === 'POST /token').length;
    const { client, authProvider } = await connectAgent(exchanges);
    try {
      assertInOrder(exchanges, [
        `401 POST ${resource}`,
        `WWW-Authenticate: Bearer realm="alcarta", resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp", scope="mail:read mail:send approvals:read"`,
        `200 GET ${server.url}/.well-known/oauth-protected-resource/mcp`,
        `200 GET ${idp.issuer}/.well-known/oauth-authorization-server`,
        `200 POST ${idp.issuer}/token`,
        `200 POST ${resource}`,
      ]);
      assert.equal(exchanges[0], `401 POST ${resource}`, 'the first request went without a token');
      const claims = decodeJwt(authProvider.tokens()!.access_token);
      assert.equal(claims.iss, idp.issuer);
      assert.equal(claims.aud, resource);
      assert.equal(claims.sub, AGENT_CLIENT.clientId);
      assert.equal(claims.scope, 'mail:read approvals:read');

      const listed = await callOk<{ mailboxes: Array<{ mailbox_id: string }> }>(client, 'list_mailboxes');
      assert.deepEqual(listed.mailboxes.map((m) => m.mailbox_id).sort(), [agentMailbox, opsMailbox].sort());
      const before = await callOk<{ messages: unknown[] }>(client, 'list_messages', { mailbox_id: agentMailbox });
      assert.deepEqual(before.messages, []);

      let settled = false;
      const waiting = callOk<{ matched: boolean; timed_out: boolean; events: Array<{ message_id: string }> }>(
        client,
        'email_await',
        { event: { type: 'message_received', mailbox_id: agentMailbox }, timeout_seconds: 50, delivery: 'poll' },
      ).finally(() => (settled = true));
      await waitFor('the agent parked in email_await', async () => (await activeWaits(server.url, 'message')) === 1);
      assert.equal(settled, false, 'email_await returned before any mail arrived');
      const messageId = await ingest(server.admin, agentMailbox, { subject: 'Invoice 42' });
      const woke = await waiting;
      assert.equal(woke.matched, true);
      assert.equal(woke.timed_out, false);
      assert.deepEqual(
        woke.events.map((e) => e.message_id),
        [messageId],
      );
      const after = await callOk<{ messages: Array<{ message_id: string }> }>(client, 'list_messages', {
        mailbox_id: agentMailbox,
      });
      assert.deepEqual(
        after.messages.map((m) => m.message_id),
        [messageId],
      );
    } finally {
      await client.close();
    }
    // One token for the whole session: the SDK reuses it for every later request.
    assert.equal(idp.requests.filter((r) => r === 'POST /token').length, tokenRequestsBefore + 1);
    assert.ok(idp.requests.includes('GET /jwks'), 'Alcarta fetched the provider keys');
  });

  it('a person in group ops signs in with the SDK (authorization code + PKCE) and reaches the mailbox granted to group:ops', async () => {
    const messageId = await ingest(server.admin, opsMailbox, { subject: 'For the ops team' });
    const person = new InMemorySignIn('Mail console', PERSON_CLIENT.clientId);
    const exchanges: Exchange[] = [];
    const signIn = new StreamableHTTPClientTransport(mcpUrl(), {
      authProvider: person,
      fetch: recordingFetch(exchanges),
    });
    await assert.rejects(
      new Client({ name: 'mail-console', version: '1.0.0' }).connect(signIn),
      UnauthorizedError,
      'without a token the SDK sends the person to the authorization server',
    );
    assertInOrder(exchanges, [
      `401 POST ${resource}`,
      `200 GET ${server.url}/.well-known/oauth-protected-resource/mcp`,
      `200 GET ${idp.issuer}/.well-known/oauth-authorization-server`,
    ]);
    const authorizationUrl = person.authorizationUrl!;
    assert.equal(`${authorizationUrl.origin}${authorizationUrl.pathname}`, `${idp.issuer}/auth`);
    assert.equal(authorizationUrl.searchParams.get('resource'), resource);
    assert.equal(authorizationUrl.searchParams.get('code_challenge_method'), 'S256');

    await signIn.finishAuth(await idp.signIn(authorizationUrl, 'alice'));
    const claims = decodeJwt(person.tokens()!.access_token);
    assert.equal(claims.sub, 'alice');
    assert.equal(claims.aud, resource);
    assert.equal(claims.email, 'alice@example.com');
    assert.deepEqual(claims.groups, ['ops']);
    // The SDK asked for the scopes the 401 named, the agent ones; the provider granted those of them
    // this client may have: never approvals:decide through an MCP client.
    assert.equal(authorizationUrl.searchParams.get('scope'), 'mail:read mail:send approvals:read');
    assert.equal(claims.scope, 'mail:read approvals:read');

    const client = new Client({ name: 'mail-console', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl(), { authProvider: person }));
    try {
      const listed = await callOk<{ mailboxes: Array<{ mailbox_id: string }> }>(client, 'list_mailboxes');
      assert.deepEqual(
        listed.mailboxes.map((m) => m.mailbox_id),
        [opsMailbox],
      );
      const messages = await callOk<{ messages: Array<{ message_id: string }> }>(client, 'list_messages', {
        mailbox_id: opsMailbox,
      });
      assert.ok(messages.messages.some((m) => m.message_id === messageId));
    } finally {
      await client.close();
    }
  });

  it('a person without the group reaches no mailbox: list_messages answers mailbox_not_found, as for any mailbox out of reach', async () => {
    const messageId = await ingest(server.admin, opsMailbox, { subject: 'Only for the ops team' });
    const alice = await connectMcp(server.url, await idp.personToken('alice'));
    const bob = await connectMcp(server.url, await idp.personToken('bob'));
    try {
      const aliceSees = await callOk<{ messages: Array<{ message_id: string }> }>(alice, 'list_messages', {
        mailbox_id: opsMailbox,
      });
      assert.ok(aliceSees.messages.some((m) => m.message_id === messageId));
      assert.deepEqual((await callOk<{ mailboxes: unknown[] }>(bob, 'list_mailboxes')).mailboxes, []);
      // The same answer as for a mailbox that does not exist: nothing tells bob the mailbox is there.
      for (const mailbox_id of [opsMailbox, agentMailbox, 'mbx_does_not_exist']) {
        const refused = await callError(bob, 'list_messages', { mailbox_id });
        assert.equal(refused.error, 'not_found', mailbox_id);
        assert.equal(refused.reason, 'mailbox_not_found', mailbox_id);
      }
    } finally {
      await Promise.all([alice.close(), bob.close()]);
    }
  });

  it("the agent's approval request, approved by the person over REST, records decided_by = her email and wakes the agent", async () => {
    const { client: agent } = await connectAgent();
    try {
      const { request_id } = await callOk<{ request_id: string }>(agent, 'request_approval', {
        mailbox_id: opsMailbox,
        title: 'Pay invoice 42',
      });
      let settled = false;
      const waiting = callOk<{ matched: boolean; requests: Array<{ request_id: string; state: string }> }>(
        agent,
        'email_await',
        { event: { type: 'request_state_changed', request_ids: [request_id] }, timeout_seconds: 50, delivery: 'poll' },
      ).finally(() => (settled = true));
      await waitFor('the agent parked in email_await', async () => (await activeWaits(server.url, 'request')) === 1);
      assert.equal(settled, false, 'email_await returned before the decision');

      const bob = server.admin.withToken(await idp.personToken('bob'));
      const outOfReach = await bob.post(`/v1/requests/${request_id}/approve`, {});
      assert.equal(outOfReach.status, 404, JSON.stringify(outOfReach.body));

      const alice = server.admin.withToken(await idp.personToken('alice'));
      const decided = await alice.post(`/v1/requests/${request_id}/approve`, {});
      assert.equal(decided.status, 200, JSON.stringify(decided.body));
      assert.equal(decided.body.state, 'approved');
      assert.equal(decided.body.decided_by, 'alice@example.com');

      const woke = await waiting;
      assert.equal(woke.matched, true);
      assert.deepEqual(woke.requests, [{ request_id, state: 'approved' }]);
      const seen = await callOk<{ state: string; decided_by: string }>(agent, 'get_request', { request_id });
      assert.equal(seen.state, 'approved');
      assert.equal(seen.decided_by, 'alice@example.com');

      // The console names the agent that asked by its client id (it has no email), with its prn_ id.
      const [{ id: agentPrincipal }] = await server.db.query<{ id: string }>(
        `SELECT id FROM principals WHERE client_id = $1`,
        [AGENT_CLIENT.clientId],
      );
      const approver = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [opsMailbox] });
      const signedIn = await postSignIn(server.url, approver.secret);
      assert.equal(signedIn.status, 303);
      const cookie = signedIn.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .find((c) => c.startsWith('alcarta_console='));
      assert.ok(cookie, 'a session cookie');
      const requestPage = await fetch(`${server.url}/console/requests/${request_id}`, { headers: { cookie } });
      assert.equal(requestPage.status, 200);
      const html = await requestPage.text();
      assert.ok(
        html.includes(`<dd class="asked-by">agent <code class="credential-id">${agentPrincipal}</code></dd>`),
        html,
      );
      assert.ok(html.includes(`<dd class="decided-by">alice@example.com</dd>`), html);
    } finally {
      await agent.close();
    }
  });
});
