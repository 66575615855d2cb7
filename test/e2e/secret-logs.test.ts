import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { simpleParser } from 'mailparser';
import { createRootLogger } from '#app/logging/logger.js';
import { postSignIn } from '../support/console';
import { callOk, connectMcp } from '../support/mcp';
import { TestSmtpRelay } from '../support/smtp-relay';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';
import { requireSystemPackage } from '../support/system-packages';

/**
 * Whoever reads the logs must not be able to act: an approval link works until its request is
 * decided, and opening it decides nothing, so a link token in a request-log line would let a log
 * reader approve outgoing mail. A real approval mail through the aiosmtpd relay, its link opened and
 * answered, console sign-in and an OpenID Connect callback: no token is in any log line (at debug),
 * metric label or error body, whatever path, query or header carried it.
 */
describe('secrets in logs, metrics and error bodies', { skip: requireSystemPackage('python3-aiosmtpd') }, () => {
  let relay: TestSmtpRelay;
  let server: TestServer;
  let agent: Client;
  let mailboxId: string;
  let log = '';
  const approver = 'ann@approvers.example';

  before(async () => {
    relay = await TestSmtpRelay.start();
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        log += chunk.toString();
        done();
      },
    });
    server = await startTestServer({
      ownPublicUrl: true,
      env: { ALCARTA_SMTP_RELAY_URL: relay.url, ALCARTA_SMTP_RETRY_BASE_SECONDS: '1' },
      logger: createRootLogger('debug', sink),
    });
    mailboxId = await createMailbox(server.admin);
    const token = await createToken(server.admin, { scopes: ['approvals:read'], mailboxes: [mailboxId] });
    agent = await connectMcp(server.url, token.secret);
    const set = await server.admin.request('PUT', `/v1/mailboxes/${mailboxId}/approvers`, { emails: [approver] });
    assert.equal(set.status, 200, JSON.stringify(set.body));
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    await relay?.stop();
  });

  /** Every place a secret must not be: the log, the metrics, and the error bodies collected. */
  const assertNowhere = async (secrets: Record<string, string>, bodies: string[]) => {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    for (const [what, secret] of Object.entries(secrets)) {
      // A fragment is enough to give a token away: the log must not hold even its first 12 characters.
      const fragment = secret.slice(0, 12);
      const line = log.split('\n').find((l) => l.includes(fragment));
      assert.equal(line, undefined, `the ${what} is in a log line`);
      assert.ok(!metrics.includes(fragment), `the ${what} is in a metric`);
      for (const body of bodies) assert.ok(!body.includes(fragment), `the ${what} is in an error body: ${body}`);
    }
  };

  it('keeps an approval link token out of every log line, metric label and error body', async () => {
    const { request_id: requestId } = await callOk(agent, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Send the quarterly report',
    });
    const text = await waitFor(
      'the approval mail',
      async () => {
        for (const mail of await relay.received()) {
          const parsed = (await simpleParser(mail.raw)).text ?? '';
          if (parsed.includes(requestId)) return parsed;
        }
        return undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    const path = new URL(/https?:\/\/\S+\/console\/links\/[A-Za-z0-9_-]+/.exec(text)![0]).pathname;
    const token = path.split('/').pop()!;

    // Opened (as a mail scanner would), then with a suffix and a broken escape, then answered.
    const opened = await fetch(server.url + path);
    assert.equal(opened.status, 200);
    const shownContent = /name="content_sha256" value="([0-9a-f]{64})"/.exec(await opened.text())![1];
    const bodies: string[] = [];
    for (const [suffix, status] of [
      ['/more', 404],
      ['%ZZ', 400],
    ] as const) {
      const res = await fetch(server.url + path + suffix);
      assert.equal(res.status, status, suffix);
      bodies.push(await res.text());
    }
    const decided = await fetch(server.url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ decision: 'approved', content_sha256: shownContent }).toString(),
    });
    assert.equal(decided.status, 200, await decided.text());

    await waitFor('the request log line of the POST', () =>
      log.includes('"req":{"method":"POST","path":"/console/links/'),
    );
    await assertNowhere({ 'link token': token }, bodies);
    assert.ok(log.includes('"path":"/console/links/[REDACTED]"'), 'the request lines are there, masked');
    assert.ok(log.includes('"path":"/console/links/[REDACTED]/more"'));
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /route="\/console\/links\/:token"/, 'metrics name the route, not the path');
  });

  it('keeps console session secrets and OpenID Connect codes out of every log line and error body', async () => {
    const approverToken = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailboxId] });
    const signedIn = await postSignIn(server.url, approverToken.secret);
    assert.equal(signedIn.status, 303);
    const cookie = signedIn.headers
      .getSetCookie()
      .find((c) => c.startsWith('alcarta_console='))!
      .split(';')[0];
    const session = cookie.slice('alcarta_console='.length);
    const page = await fetch(`${server.url}/console`, { headers: { cookie } });
    assert.equal(page.status, 200);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? '';
    assert.ok(csrf.length > 0, 'the page has a CSRF token');

    const code = randomBytes(32).toString('base64url');
    const state = randomBytes(32).toString('base64url');
    const bodies: string[] = [];
    for (const path of [
      `/console/sign-in/callback?code=${code}&state=${state}`,
      `/console/nowhere/${code}?state=${state}`,
      `/v1/nowhere/${session}`,
    ]) {
      const res = await fetch(server.url + path, { headers: { cookie } });
      assert.ok(res.status >= 400 && res.status < 500, `${path}: ${res.status}`);
      bodies.push(await res.text());
    }
    await waitFor('the request log line of the last request', () => log.includes('"path":"/v1/nowhere/'));
    await assertNowhere({ 'session secret': session, 'CSRF token': csrf, code, state }, bodies);
  });
});
