import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Browser, BrowserContext, Page } from 'playwright-core';
import { DrainState } from '#app/lifecycle/drain-state.js';
import { WaiterRegistry } from '#app/waits/waiter-registry.js';
import { launchChromium } from '../support/browser';
import { postSignIn } from '../support/console';
import { callOk, connectMcp } from '../support/mcp';
import { metricValue } from '../support/metrics';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** docs/approvers.md: a new request, and one decided elsewhere, appears / changes within 2 s without a reload. */
const LIVE_MS = 2000;
/** How long a check may take to fail with a useful message, well beyond LIVE_MS. */
const PATIENCE_MS = 10_000;

interface Approver {
  id: string;
  secret: string;
}

/** Waits for the response that opens a live stream of `page` (sent once the feed is parked). */
function streamOpened(page: Page) {
  return page.waitForResponse((r) => new URL(r.url()).pathname === '/console/events');
}

/**
 * A browser context signed in through the form, on `path`. On a pending list, it returns once the
 * list's live stream is open, with every HTTP request the page makes from then on.
 */
async function openConsole(browser: Browser, server: TestServer, approver: Approver, path = '/console') {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/console/sign-in`);
  await page.getByLabel('Token').fill(approver.secret);
  const landed = streamOpened(page);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${server.url}/console`);
  assert.equal((await landed).status(), 200);
  const requests: string[] = [];
  if (path !== '/console') {
    const listed = path.startsWith('/console?') ? streamOpened(page) : undefined;
    await page.goto(`${server.url}${path}`);
    if (listed) assert.equal((await listed).status(), 200);
  }
  page.on('request', (r) => requests.push(`${r.method()} ${r.url()}`));
  return { context, page, requests };
}

/** The number of open live lists (request feeds parked in the wait engine) of a server. */
function openFeeds(server: TestServer): number {
  return server.running.app.get(WaiterRegistry).allRequestFeeds().length;
}

/** Resolves with the time it took until `selector` is in (`attached`) or out of (`detached`) `page`. */
async function timeUntil(page: Page, selector: string, state: 'attached' | 'detached'): Promise<number> {
  const start = Date.now();
  await page.locator(selector).waitFor({ state, timeout: PATIENCE_MS });
  return Date.now() - start;
}

/**
 * The live pending list of the console (docs/approvers.md): a Server-Sent Events stream per page,
 * woken by the same `request` doorbells as the agents' waits. The safety re-check is set to its
 * longest, so what these tests measure is the doorbell. A real server, a real Chromium, the
 * official MCP SDK.
 */
describe('console live pending list', () => {
  let server: TestServer;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let mailbox: string;
  let otherMailbox: string;
  let approver: Approver;
  let secondApprover: Approver;
  let agent: Client;
  let watcher: { context: BrowserContext; page: Page; requests: string[] };
  let baseline: number;
  let request: string;

  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_WAIT_RECHECK_SECONDS: '30' } });
    mailbox = await createMailbox(server.admin);
    otherMailbox = await createMailbox(server.admin);
    approver = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailbox, otherMailbox] });
    secondApprover = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailbox] });
    const agentToken = await createToken(server.admin, {
      scopes: ['mail:send', 'approvals:read'],
      mailboxes: [mailbox, otherMailbox],
    });
    agent = await connectMcp(server.url, agentToken.secret);
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    await agent?.close();
    await browser?.close();
    await server?.close();
  });

  browserIt('a request an agent creates over MCP appears within 2 s, and the page asks nothing meanwhile', async () => {
    watcher = await openConsole(browser!, server, approver);
    assert.match(await watcher.page.locator('.empty').innerText(), /Nothing is waiting for your decision/);
    await waitFor('the page’s feed parked in the wait engine', () => openFeeds(server) === 1);
    baseline = watcher.requests.length;

    request = (await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Publish release 5.0' }))
      .request_id;
    const took = await timeUntil(watcher.page, `[data-request-id="${request}"]`, 'attached');
    assert.ok(took < LIVE_MS, `appeared ${took} ms after the tool answered`);
    assert.equal(await watcher.page.locator('.requests li > a').innerText(), 'Publish release 5.0');
    assert.equal(await watcher.page.locator('.empty').count(), 0);
    assert.equal(await watcher.page.locator('#pending-announcer').innerText(), '1 new request. 1 request pending.');
    // Times are shown in the browser's zone, as on a loaded page.
    assert.ok(!(await watcher.page.locator('#pending-list time').first().innerText()).endsWith('UTC'));
    assert.deepEqual(watcher.requests.slice(baseline), [], 'no HTTP request while waiting');
  });

  browserIt('a second browser that approves it makes it leave the first browser’s list within 2 s', async () => {
    const second = await openConsole(browser!, server, secondApprover, `/console/requests/${request}`);
    await second.page.getByRole('button', { name: 'Approve' }).click();
    await second.page.waitForURL(`${server.url}/console/requests/${request}?notice=decided`);

    const took = await timeUntil(watcher.page, `[data-request-id="${request}"]`, 'detached');
    assert.ok(took < LIVE_MS, `left the list ${took} ms after the decision was recorded`);
    assert.match(await watcher.page.locator('.empty').innerText(), /Nothing is waiting for your decision/);
    assert.equal(
      await watcher.page.locator('#pending-announcer').innerText(),
      '1 request decided or gone. 0 requests pending.',
    );
    assert.deepEqual(watcher.requests.slice(baseline), [], 'no HTTP request while waiting');
    await second.context.close();
  });

  browserIt('a list filtered by mailbox follows only that mailbox', async () => {
    const filtered = await openConsole(browser!, server, approver, `/console?mailbox=${otherMailbox}`);
    const elsewhere = (await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Elsewhere' })).request_id;
    await timeUntil(watcher.page, `[data-request-id="${elsewhere}"]`, 'attached');
    const here = (await callOk(agent, 'request_approval', { mailbox_id: otherMailbox, title: 'Here' })).request_id;
    await timeUntil(filtered.page, `[data-request-id="${here}"]`, 'attached');
    assert.deepEqual(await filtered.page.locator('.requests li > a').allInnerTexts(), ['Here']);
    await filtered.context.close();
  });

  browserIt('closing the page removes its feed from the wait engine', async () => {
    // By identity, not by count: a feed of an earlier page may still be on its way out.
    const before = new Set(server.running.app.get(WaiterRegistry).allRequestFeeds());
    const extra = await openConsole(browser!, server, approver);
    const ours = () =>
      server.running.app
        .get(WaiterRegistry)
        .allRequestFeeds()
        .filter((f) => !before.has(f));
    await waitFor('the second page’s feed', () => ours().length === 1);
    const [feed] = ours();
    await extra.context.close();
    await waitFor(
      'the closed page’s feed removed',
      () => !server.running.app.get(WaiterRegistry).allRequestFeeds().includes(feed),
    );
  });

  browserIt('the stream of a revoked token’s session ends, and the page says so', async () => {
    const revokable = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailbox] });
    const session = await openConsole(browser!, server, revokable);
    const cookie = (await session.context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const raw = await fetch(`${server.url}/console/events`, { headers: { cookie } });
    assert.equal(raw.status, 200);
    assert.match(raw.headers.get('content-type') ?? '', /^text\/event-stream/);
    const body = raw.text();

    assert.equal((await server.admin.delete(`/v1/tokens/${revokable.id}`)).status, 204);
    const text = await body;
    assert.match(text, /^retry: \d+\n\n/);
    assert.match(text, /event: ended\ndata: \{"reason":"token_revoked"\}\n\n$/);
    await session.page.getByText('Your session ended. Reload the page to sign in again.').waitFor();
    // The session is over: a reconnect is refused, so nothing streams any more.
    const again = await fetch(`${server.url}/console/events`, { headers: { cookie }, redirect: 'manual' });
    assert.equal(again.status, 401);
    await again.text();
    await session.context.close();
  });

  browserIt('a session that runs out ends its live list then, and the page says it expired', async () => {
    const expiring = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailbox] });
    const session = await openConsole(browser!, server, expiring);
    // The session runs out a few seconds from now; a page loaded now streams until then.
    await server.db.query(
      `UPDATE console_sessions SET expires_at = now() + interval '4 seconds' WHERE credential_id = $1`,
      [expiring.id],
    );
    const listed = streamOpened(session.page);
    await session.page.goto(`${server.url}/console`);
    assert.equal((await listed).status(), 200);
    // At expiry, not at the stream's 10-minute reconnect, the page leaves the list and says why.
    await session.page.waitForURL(`${server.url}/console/sign-in?expired=1`, { timeout: PATIENCE_MS });
    assert.match(await session.page.getByRole('status').innerText(), /Your session expired/);
    await session.context.close();
  });

  browserIt('signing out in one tab ends another tab’s live list on another replica within 2 s', async () => {
    // A second replica on the same database: the sign-out's doorbell must reach it.
    const replica = await startTestServer({
      db: server.db,
      adminToken: server.adminToken,
      env: { ALCARTA_WAIT_RECHECK_SECONDS: '30' },
    });
    try {
      const tabA = await openConsole(browser!, server, approver);
      // The same browser context, so the same session: cookies belong to the host, not the port.
      const tabB = await tabA.context.newPage();
      const listed = streamOpened(tabB);
      await tabB.goto(`${replica.url}/console`);
      assert.equal((await listed).status(), 200);
      // And a raw stream of the session on replica B, to see how the server ends it.
      const cookie = (await tabA.context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
      const raw = await fetch(`${replica.url}/console/events`, { headers: { cookie } });
      assert.equal(raw.status, 200);
      const rawText = raw.text();
      await waitFor('both streams parked on replica B', () => openFeeds(replica) === 2);

      // Timed from the moment replica A answered the sign-out (the session was deleted then), as the
      // decision above is timed from its answer: what the browser does before it posts is not ours.
      const signedOut = tabA.page
        .waitForResponse((r) => new URL(r.url()).pathname === '/console/sign-out' && r.request().method() === 'POST')
        .then(() => Date.now());
      await tabA.page.getByRole('button', { name: 'Sign out' }).click();
      await tabB.waitForURL(`${replica.url}/console/sign-in?signed_out=1`, {
        timeout: PATIENCE_MS,
        waitUntil: 'commit',
      });
      const took = Date.now() - (await signedOut);
      assert.ok(took < LIVE_MS, `tab B showed the sign-in page ${took} ms after replica A signed tab A out`);
      assert.match(await tabB.getByRole('status').innerText(), /You are signed out/);
      await tabA.page.waitForURL(`${server.url}/console/sign-in?signed_out=1`);
      assert.match(await rawText, /^retry: \d+\n\n(.|\n)*event: ended\ndata: \{"reason":"signed_out"\}\n\n$/);
      await waitFor('replica B’s streams ended', () => openFeeds(replica) === 0, { timeoutMs: LIVE_MS });
      await tabA.context.close();
    } finally {
      await replica.close({ keepDatabase: true });
    }
  });

  browserIt('without JavaScript the page is the same list, current as of its load', async () => {
    const context = await browser!.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    const streams: string[] = [];
    page.on('request', (r) => (new URL(r.url()).pathname === '/console/events' ? streams.push(r.url()) : undefined));
    await page.goto(`${server.url}/console/sign-in`);
    await page.getByLabel('Token').fill(approver.secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${server.url}/console`);
    const shown = await page.locator('.requests li > a').allInnerTexts();
    assert.ok(shown.includes('Here'), `listed: ${shown.join(', ')}`);
    assert.deepEqual(streams, [], 'no stream without the script');
    await context.close();
  });
});

describe('console live pending list: lost doorbells and drain', () => {
  let server: TestServer;
  let mailbox: string;
  let cookie: string;
  let agent: Client;

  before(async () => {
    server = await startTestServer({ env: { ALCARTA_WAIT_RECHECK_SECONDS: '1' } });
    mailbox = await createMailbox(server.admin);
    const approver = await createToken(server.admin, { scopes: ['approvals:decide'], mailboxes: [mailbox] });
    const agentToken = await createToken(server.admin, {
      scopes: ['mail:send', 'approvals:read'],
      mailboxes: [mailbox],
    });
    agent = await connectMcp(server.url, agentToken.secret);
    const signIn = await postSignIn(server.url, approver.secret);
    assert.equal(signIn.status, 303);
    cookie = signIn.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
  });

  after(async () => {
    await agent?.close();
    await server?.close();
  });

  const liveStreams = () => metricValue(server.url, 'alcarta_console_live_streams');

  /** Reads SSE events from a stream until `until` says enough. */
  async function readEvents(body: ReadableStream<Uint8Array>, until: (text: string) => boolean): Promise<string> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!until(text)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    reader.releaseLock();
    return text;
  }

  it('a change whose doorbell was lost reaches the list at the safety re-check', async () => {
    const request = (await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Quiet change' }))
      .request_id;
    const page = await fetch(`${server.url}/console`, { headers: { cookie } });
    const seen = /data-fingerprint="([^"]+)"/.exec(await page.text())![1];
    const stream = await fetch(`${server.url}/console/events?seen=${seen}`, { headers: { cookie } });
    assert.equal(stream.status, 200);
    await waitFor('the stream’s feed', () => server.running.app.get(WaiterRegistry).allRequestFeeds().length === 1);
    await waitFor('the stream in alcarta_console_live_streams', async () => (await liveStreams()) === 1);
    // Decided behind the application's back: no doorbell rings.
    await server.db.query(`UPDATE approval_requests SET state = 'expired', decided_at = now() WHERE id = $1`, [
      request,
    ]);
    const text = await readEvents(stream.body!, (t) => t.includes('event: pending'));
    assert.match(text, /event: pending\nid: [\w-]+\ndata: /);
    assert.ok(!text.includes(request), 'the list no longer shows the request');
    assert.match(text, /Nothing is waiting for your decision/);
    await stream.body!.cancel();
    await waitFor('the feed removed', () => server.running.app.get(WaiterRegistry).allRequestFeeds().length === 0);
    await waitFor('alcarta_console_live_streams back to 0', async () => (await liveStreams()) === 0);
  });

  it('a drain ends every stream', async () => {
    const stream = await fetch(`${server.url}/console/events`, { headers: { cookie } });
    assert.equal(stream.status, 200);
    const ended = stream.text();
    await waitFor('the stream’s feed', () => server.running.app.get(WaiterRegistry).allRequestFeeds().length === 1);
    await server.running.app.get(DrainState).begin();
    assert.match(await ended, /^retry: \d+\n\n/);
  });
});
