import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { dovecotAccount, imapSource, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { postSignIn } from '../support/console';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { callOk, connectMcp } from '../support/mcp';
import { requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';

/** The session cookie a token sign-in sets, as a Cookie header. */
async function sessionCookie(serverUrl: string, secret: string): Promise<string> {
  const res = await postSignIn(serverUrl, secret);
  assert.equal(res.status, 303);
  return res.headers.getSetCookie()[0].split(';')[0];
}

/** The `<li>` of a mailbox in the page's "Connected accounts" list. */
function connectedAccountItem(html: string, mailboxId: string): string | undefined {
  return new RegExp(`<li data-mailbox-id="${mailboxId}"[\\s\\S]*?</li>`).exec(html)?.[0];
}

/**
 * docs/connected-mailboxes.md, "In the console": wherever the console shows mailboxes (the
 * pending and history pages with their mailbox filter, a request's page), a connected mailbox shows
 * its account's state, last sync, lag and last error, and never its settings' secrets.
 */
describe('console: connected accounts', () => {
  let server: TestServer;
  let pausedMailbox: string;
  let plainMailbox: string;
  let approver: { id: string; secret: string };
  let cookie: string;
  let agent: Client;
  const password = 'pw-console-never-shown-1f9c';

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: secretsKey() } });
    // Paused from the start: nothing connects, so no IMAP server is needed.
    const created = await server.admin.post('/v1/mailboxes', {
      address: `paused-${process.pid}@example.com`,
      source: {
        kind: 'imap',
        host: '127.0.0.1',
        port: 1,
        tls: 'none',
        username: 'paused@example.com',
        auth: { password },
        paused: true,
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    pausedMailbox = created.body.mailbox_id as string;
    plainMailbox = await createMailbox(server.admin);
    approver = await createToken(server.admin, {
      scopes: ['approvals:decide'],
      mailboxes: [pausedMailbox, plainMailbox],
    });
    cookie = await sessionCookie(server.url, approver.secret);
    const agentToken = await createToken(server.admin, {
      scopes: ['approvals:read'],
      mailboxes: [pausedMailbox, plainMailbox],
    });
    agent = await connectMcp(server.url, agentToken.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  const page = async (path: string) => {
    const res = await fetch(`${server.url}${path}`, { headers: { cookie } });
    assert.equal(res.status, 200, path);
    return res.text();
  };

  it('lists connected mailboxes with their state on the pending and history pages, and names it in the filter', async () => {
    for (const path of ['/console', '/console/history']) {
      const html = await page(path);
      assert.match(html, /<h2 id="connected-accounts-heading">Connected accounts<\/h2>/, path);
      const item = connectedAccountItem(html, pausedMailbox);
      assert.ok(item, `${path} lists the connected mailbox`);
      assert.match(item, /data-source-state="paused"/);
      assert.match(item, /last sync not yet/);
      assert.match(item, /lag \d+ s/);
      assert.equal(connectedAccountItem(html, plainMailbox), undefined, 'a mailbox without an account is not listed');
      assert.match(
        html,
        new RegExp(`value="${pausedMailbox}">paused-${process.pid}@example.com \\(connected: paused\\)`),
      );
      assert.equal(html.includes(password), false, 'the password is never shown');
    }
  });

  it('filtered to a mailbox without an account, the pending page lists no connected account', async () => {
    const html = await page(`/console?mailbox=${plainMailbox}`);
    assert.equal(html.includes('Connected accounts'), false);
  });

  it("shows the mailbox's connected account on a request's page", async () => {
    const { request_id } = await callOk(agent, 'request_approval', {
      mailbox_id: pausedMailbox,
      title: 'Archive the old tickets',
    });
    const html = await page(`/console/requests/${request_id as string}`);
    assert.match(html, /<dt>Connected account<\/dt><dd data-source-state="paused">/);
    const other = (await callOk(agent, 'request_approval', { mailbox_id: plainMailbox, title: 'Plain mailbox' }))
      .request_id as string;
    assert.equal((await page(`/console/requests/${other}`)).includes('Connected account'), false);
  });
});

describe('console: a connected account that cannot be reached', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let dovecot: TestDovecot;
  let server: TestServer;

  before(async () => {
    dovecot = await startDovecot();
    server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: secretsKey() } });
  });

  after(async () => {
    await server?.close();
    await dovecot?.close();
  });

  it('shows the state and the last error once the provider is gone', async () => {
    const account = await dovecotAccount(dovecot);
    const created = await server.admin.post('/v1/mailboxes', {
      address: account.username,
      source: imapSource(dovecot, account),
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const mailboxId = created.body.mailbox_id as string;
    const approver = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailboxId] });
    const cookie = await sessionCookie(server.url, approver.secret);

    await sourceReaches(server.admin, mailboxId, 'idle');
    let html = await (await fetch(`${server.url}/console`, { headers: { cookie } })).text();
    let item = connectedAccountItem(html, mailboxId);
    assert.ok(item);
    assert.match(item, /data-source-state="idle"/);

    await dovecot.stop();
    const unreachable = await sourceReaches(server.admin, mailboxId, 'unreachable', 30_000);
    html = await (await fetch(`${server.url}/console`, { headers: { cookie } })).text();
    item = connectedAccountItem(html, mailboxId);
    assert.ok(item);
    assert.match(item, /data-source-state="unreachable"/);
    assert.match(item, /<span class="state source-state-unreachable">unreachable<\/span>/);
    assert.ok(unreachable.last_error, 'the source view has the error');
    assert.match(item, /last error: /);
    assert.equal(html.includes(account.password), false, 'the password is never shown');
  });
});
