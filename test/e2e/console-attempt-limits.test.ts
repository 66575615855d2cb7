import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { signInForm } from '../support/console';
import { PlainResponse, requestFrom } from '../support/local-address';
import { callOk, connectMcp } from '../support/mcp';
import { metricValue } from '../support/metrics';
import { recordSecret } from '../support/test-logs';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

/**
 * Failed attempts per client address and minute, each kind on its own (the default is 10). With 4,
 * a refused attempt stays refused for 15 s after its burst began: ample time for the assertions
 * that follow it, on a busy machine too.
 */
const LIMIT = 4;
/** The proxy this server trusts: it alone may name the client in X-Forwarded-For. */
const PROXY = '127.0.0.2';

const unknownLink = () => `/console/links/${randomBytes(32).toString('base64url')}`;

/**
 * Sends attempts (each answering `status`) until one is refused, and checks that the limit let
 * exactly its burst through, plus what refilled meanwhile (a busy machine may be slow).
 */
async function untilThrottled(
  what: string,
  status: number,
  attempt: (i: number) => Promise<PlainResponse>,
): Promise<PlainResponse> {
  const started = Date.now();
  for (let passed = 0; passed <= 2 * LIMIT; passed++) {
    const res = await attempt(passed);
    if (res.status === 429) {
      const refilled = Math.floor(((Date.now() - started) / 60_000) * LIMIT);
      assert.ok(passed >= LIMIT && passed <= LIMIT + refilled, `${what}: ${passed} attempts went through`);
      return res;
    }
    assert.equal(res.status, status, `${what}, attempt ${passed + 1}: ${res.text.slice(0, 200)}`);
  }
  assert.fail(`${what}: never refused`);
}

function assertThrottled(res: PlainResponse, what: string): void {
  assert.equal(res.status, 429, `${what}: ${res.status} ${res.text.slice(0, 200)}`);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  assert.match(String(res.headers['content-type']), /^text\/html/);
  assert.match(String(res.headers['content-security-policy']), /default-src 'self'/, 'a console page like the others');
  assert.match(res.text, /Too many/);
}

/**
 * Guessing at approval links and console sign-in is held to ALCARTA_CONSOLE_ATTEMPTS_PER_MINUTE per
 * client address, and the address cannot be chosen by the client: X-Forwarded-For counts only
 * when a trusted proxy (ALCARTA_TRUSTED_PROXIES) sends it. Plain HTTP from distinct loopback
 * addresses plays the clients and the proxy.
 */
describe('console attempt limits', () => {
  let server: TestServer;
  let agent: Client;
  let approverSecret: string;
  let link: string;

  before(async () => {
    server = await startTestServer({
      env: { ALCARTA_TRUSTED_PROXIES: PROXY, ALCARTA_CONSOLE_ATTEMPTS_PER_MINUTE: String(LIMIT) },
    });
    const mailboxId = await createMailbox(server.admin);
    const agentToken = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [mailboxId] });
    approverSecret = (await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailboxId] })).secret;
    agent = await connectMcp(server.url, agentToken.secret);
    const { request_id } = await callOk(agent, 'request_approval', { mailbox_id: mailboxId, title: 'Pay invoice 9' });
    // A working link, stored as the approval mail stores one (only its hash).
    const token = randomBytes(32).toString('base64url');
    recordSecret('approval-link token (test)', token);
    await server.db.query(
      `INSERT INTO approval_links (token_hash, request_id, email, expires_at) VALUES ($1, $2, 'ann@example.com', now() + interval '1 hour')`,
      [createHash('sha256').update(token).digest('hex'), request_id],
    );
    link = `/console/links/${token}`;
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  it('refuses unknown links beyond the limit per address, whatever X-Forwarded-For a client sends', async () => {
    const url = (path: string) => server.url + path;
    // An office behind one address opening a working link again and again: never slowed.
    for (let i = 0; i < LIMIT + 5; i++) {
      assert.equal((await requestFrom('127.0.0.3', url(link))).status, 200, `working link, attempt ${i + 1}`);
    }

    // A client that is no proxy names a new address in every request: all count as its own.
    const spoofed = (i: number) => ({ 'x-forwarded-for': `198.51.100.${i}`, forwarded: `for=198.51.100.${i}` });
    assertThrottled(
      await untilThrottled('guesses with spoofed addresses', 404, (i) =>
        requestFrom('127.0.0.1', url(unknownLink()), { headers: spoofed(i) }),
      ),
      'the guess beyond the limit',
    );
    assertThrottled(
      await requestFrom('127.0.0.1', url(link), { method: 'POST', headers: spoofed(98) }),
      'a working link from that address, before any lookup',
    );
    assert.equal((await requestFrom('127.0.0.3', url(link))).status, 200, 'other addresses are not affected');

    // Through the trusted proxy, the client it names is the one counted.
    const viaProxy = (xff: string, path = unknownLink()) =>
      requestFrom(PROXY, url(path), { headers: { 'x-forwarded-for': xff } });
    assertThrottled(
      await untilThrottled('guesses through the proxy', 404, () => viaProxy('203.0.113.1')),
      'the client behind the proxy',
    );
    assertThrottled(
      await viaProxy('192.0.2.77, 203.0.113.1'),
      'an address the client put in front of the proxy’s own entry is not believed',
    );
    assert.equal((await viaProxy('203.0.113.2')).status, 404, 'another client behind the same proxy');
    assert.equal((await viaProxy('203.0.113.2', link)).status, 200);

    assert.ok((await metricValue(server.url, 'alcarta_console_attempts_refused_total', { attempt: 'link' })) >= 4);
  });

  it('refuses failed sign-ins beyond the limit per address: token form and OpenID Connect callback alike', async () => {
    const form = await signInForm(server.url);
    const signIn = (from: string, token: string) =>
      requestFrom(from, `${server.url}/console/sign-in`, {
        method: 'POST',
        headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: form.field, token }).toString(),
      });
    const callback = (from: string) =>
      requestFrom(from, `${server.url}/console/sign-in/callback?code=${randomBytes(32).toString('base64url')}&state=x`);

    // Successful sign-ins give their attempt back.
    for (let i = 0; i < LIMIT + 2; i++) assert.equal((await signIn('127.0.0.4', approverSecret)).status, 303);

    // Unknown tokens, and callbacks of no sign-in in progress, one after the other.
    await untilThrottled('failed sign-ins', 400, (i) =>
      i % 2 === 0 ? signIn('127.0.0.5', `alc_${randomBytes(36).toString('hex')}`) : callback('127.0.0.5'),
    );
    assertThrottled(await signIn('127.0.0.5', approverSecret), 'even the right token, once the limit is reached');
    assertThrottled(await callback('127.0.0.5'), 'a callback');
    assertThrottled(await requestFrom('127.0.0.5', `${server.url}/console/sign-in/oidc`), 'the start of a sign-in');
    assert.equal((await signIn('127.0.0.4', approverSecret)).status, 303, 'other addresses sign in');
    assert.equal(
      (await requestFrom('127.0.0.5', `${server.url}/console/sign-in`)).status,
      200,
      'the sign-in page itself is no attempt',
    );
    assert.ok((await metricValue(server.url, 'alcarta_console_attempts_refused_total', { attempt: 'sign_in' })) >= 3);
  });
});
