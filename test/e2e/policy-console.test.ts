import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Browser, BrowserContext, Page } from 'playwright-core';
import { axeViolations, launchChromium } from '../support/browser';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** Long enough for any wake-up on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 60;

type Token = { id: string; secret: string };

/**
 * docs/policies.md in the approver console: a mailbox whose policy names two approvers and a quorum
 * of two. The first approval (one Chromium session) leaves the request pending and shows "1 of 2",
 * and the agent's monitor_approval (official MCP SDK) keeps waiting; the second (another session)
 * approves it and releases the agent. A holder of approvals:decide whom the policy does not name
 * is refused (REST 403 not_an_approver, and the console says why), and the policy page shows the
 * rules read-only.
 */
describe('approval policy in the console', () => {
  let server: TestServer;
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let mailbox: string;
  let alice: Token;
  let bob: Token;
  let carol: Token;
  let agent: Client;
  let request: string;
  const contexts: BrowserContext[] = [];

  const browserIt = (name: string, body: () => Promise<void>): void => {
    it(name, async (t) => (skipReason ? t.skip(skipReason) : body()));
  };
  const url = (path: string) => `${server.url}${path}`;
  /** A fresh browser context signed in with `secret`; axe (axeViolations) needs `bypassCSP` to inject itself. */
  const signedIn = async (secret: string, options: { bypassCSP?: boolean } = {}): Promise<Page> => {
    const context = await browser!.newContext(options);
    contexts.push(context);
    const page = await context.newPage();
    await page.goto(url('/console/sign-in'));
    await page.getByLabel('Token').fill(secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(url('/console'));
    return page;
  };

  before(async () => {
    server = await startTestServer();
    mailbox = await createMailbox(server.admin, `finance-${process.pid}@example.com`);
    const decider = (name: string) =>
      createToken(server.admin, { name, scopes: ['approvals:decide'], mailboxes: [mailbox] });
    [alice, bob, carol] = [await decider('Alice'), await decider('Bob'), await decider('Carol')];
    const policy = await server.admin.request('PUT', `/v1/mailboxes/${mailbox}/policy`, {
      approvers: [alice.id, bob.id],
      quorum: 2,
      expires_after_seconds: 3600,
      escalate_after_seconds: 600,
      escalate_to: ['cfo@example.com'],
      recipients: { allow: ['partner.example'], block: ['rival.example'] },
    });
    assert.equal(policy.status, 200, JSON.stringify(policy.body));
    const agentToken = await createToken(server.admin, {
      name: 'Payments bot',
      scopes: ['approvals:read'],
      mailboxes: [mailbox],
    });
    agent = await connectMcp(server.url, agentToken.secret);
    const launched = await launchChromium();
    if ('skip' in launched) skipReason = launched.skip;
    else browser = launched.browser;
  });

  after(async () => {
    for (const context of contexts) await context.close();
    await agent?.close();
    await browser?.close();
    await server?.close();
  });

  browserIt('two approvers under quorum 2: the first leaves it pending (1 of 2), the second approves it', async () => {
    request = (await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Pay invoice 2291' })).request_id;
    let returned = false;
    const waiting = callOk(agent, 'monitor_approval', { request_id: request, timeout_seconds: BLOCK }).finally(() => {
      returned = true;
    });
    await waitFor('the agent’s parked wait', async () => (await activeWaits(server.url, 'request')) === 1);

    const first = await signedIn(alice.secret, { bypassCSP: true });
    await first.goto(url(`/console/requests/${request}`));
    await first.getByRole('button', { name: 'Approve' }).click();
    await first.waitForURL(url(`/console/requests/${request}?notice=recorded`));
    assert.match(await first.locator('.notice[role="status"]').first().innerText(), /Your approval was recorded/);
    assert.equal(await first.locator('.state').first().textContent(), 'pending');
    const progress = await first.locator('dd.approvals').innerText();
    assert.match(progress, new RegExp(`^1 of 2 approvals: Alice ${alice.id} at .+`));
    assert.equal(await first.getByRole('button', { name: 'Approve' }).count(), 0, 'no second Approve for Alice');
    assert.equal(await first.locator('.standing').innerText(), 'You approved; waiting for 1 more.');
    assert.deepEqual(await axeViolations(first), []);

    // The pending list shows the progress too.
    await first.goto(url('/console'));
    assert.match(
      await first.locator(`li[data-request-id="${request}"] .quorum`).innerText(),
      new RegExp(`^1 of 2 approvals: Alice ${alice.id} at `),
    );

    const stored = await callOk(agent, 'get_request', { request_id: request });
    assert.equal(stored.state, 'pending');
    assert.deepEqual(
      stored.approvals.map((a: { by: string }) => a.by),
      [alice.id],
    );
    // Nothing woke the agent: its wait is still parked and has not returned.
    assert.equal(await activeWaits(server.url, 'request'), 1);
    assert.equal(returned, false, 'monitor_approval is still waiting after one of two approvals');

    const second = await signedIn(bob.secret);
    await second.goto(url(`/console/requests/${request}`));
    assert.match(await second.locator('dd.approvals').innerText(), /^1 of 2 approvals: Alice/);
    await second.getByLabel('Reason (optional)').fill('Matches the purchase order.');
    await second.getByRole('button', { name: 'Approve' }).click();
    await second.waitForURL(url(`/console/requests/${request}?notice=decided`));
    assert.equal(await second.locator('.state').first().textContent(), 'approved');
    assert.match(
      await second.locator('dd.approvals').innerText(),
      new RegExp(`^2 of 2 approvals: Alice ${alice.id} at .+; Bob ${bob.id} at .+`),
    );
    assert.equal(await second.locator('.decided-by').innerText(), `Bob ${bob.id}`);

    const result = await waiting;
    assert.equal(result.matched, true);
    assert.deepEqual(
      result.requests.map((r: { request_id: string; state: string }) => [r.request_id, r.state]),
      [[request, 'approved']],
    );
    assert.deepEqual(
      result.requests[0].approvals.map((a: { by: string }) => a.by),
      [alice.id, bob.id],
      'the agent learns who approved from the wait’s result',
    );
    const decided = await callOk(agent, 'get_request', { request_id: request });
    assert.equal(decided.state, 'approved');
    assert.equal(decided.quorum, 2);
    assert.deepEqual(
      decided.approvals.map((a: { by: string; reason: string | null }) => [a.by, a.reason]),
      [
        [alice.id, null],
        [bob.id, 'Matches the purchase order.'],
      ],
    );
  });

  browserIt(
    'someone with approvals:decide whom the policy does not name: 403 not_an_approver, and the console says why',
    async () => {
      const other = (await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Pay invoice 2292' }))
        .request_id;
      const rest = server.admin.withToken(carol.secret);
      const refused = await rest.post(`/v1/requests/${other}/approve`, {});
      assert.equal(refused.status, 403, JSON.stringify(refused.body));
      assert.equal(refused.body.reason, 'not_an_approver');

      const page = await signedIn(carol.secret, { bypassCSP: true });
      await page.goto(url(`/console/requests/${other}`));
      assert.equal(await page.getByRole('button', { name: 'Approve' }).count(), 0);
      assert.equal(await page.getByRole('button', { name: 'Reject' }).count(), 0);
      assert.match(
        await page.locator('.standing').innerText(),
        /approval policy names its approvers, and you are not among them/,
      );
      assert.deepEqual(await axeViolations(page), []);

      // A form posted anyway (a page opened before the policy changed) answers with the page, not an error.
      const csrf = await page.locator('input[name="_csrf"]').first().inputValue();
      const stored = await callOk(agent, 'get_request', { request_id: other });
      const posted = await page.request.post(url(`/console/requests/${other}/approve`), {
        form: { _csrf: csrf, content_sha256: stored.content_sha256 },
        maxRedirects: 0,
      });
      assert.equal(posted.status(), 303);
      assert.equal(posted.headers().location, `/console/requests/${other}?notice=not_an_approver`);
      await page.goto(url(`/console/requests/${other}?notice=not_an_approver`));
      assert.match(await page.getByRole('alert').innerText(), /not among the approvers this mailbox's policy names/);
      assert.equal((await callOk(agent, 'get_request', { request_id: other })).state, 'pending', 'nothing changed');
    },
  );

  browserIt('an approver who approved already and posts again is told so, not shown an error', async () => {
    const third = (await callOk(agent, 'request_approval', { mailbox_id: mailbox, title: 'Pay invoice 2293' }))
      .request_id;
    const page = await signedIn(alice.secret);
    await page.goto(url(`/console/requests/${third}`));
    const content = await page.locator('input[name="content_sha256"]').inputValue();
    const csrf = await page.locator('input[name="_csrf"]').first().inputValue();
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(url(`/console/requests/${third}?notice=recorded`));
    // The same form again, as a second tab opened before the first approval would post it.
    const again = await page.request.post(url(`/console/requests/${third}/approve`), {
      form: { _csrf: csrf, content_sha256: content },
      maxRedirects: 0,
    });
    assert.equal(again.status(), 303);
    assert.equal(again.headers().location, `/console/requests/${third}?notice=already_approved`);
    await page.goto(url(`/console/requests/${third}?notice=already_approved`));
    assert.match(
      await page.locator('.notice[role="status"]').first().innerText(),
      /You had already approved this request: an approver counts once\. The request waits for 1 more approval/,
    );
    const stored = await callOk(agent, 'get_request', { request_id: third });
    assert.equal(stored.state, 'pending');
    assert.equal(stored.approvals.length, 1);
  });

  browserIt('the policy page shows approvers, quorum, expiry, escalation and recipient rules, read-only', async () => {
    const page = await signedIn(carol.secret, { bypassCSP: true });
    await page.goto(url(`/console/requests/${request}`));
    await page.getByRole('link', { name: 'Approval policy', exact: true }).click();
    await page.waitForURL(url(`/console/mailboxes/${mailbox}/policy`));
    assert.equal(
      await page.getByRole('heading', { level: 1 }).innerText(),
      `Approval policy of finance-${process.pid}@example.com`,
    );
    assert.deepEqual(await page.locator('.policy-approvers li').allInnerTexts(), [alice.id, bob.id]);
    assert.match(await page.locator('.policy-quorum').innerText(), /^2 different approvers must approve a request/);
    const facts = await page.locator('dl.policy').innerText();
    assert.match(facts, /3600 seconds after the request is made/);
    assert.match(facts, /After 600 seconds without a decision, mailed to cfo@example\.com/);
    assert.match(await page.locator('.policy-block').innerText(), /^rival\.example/);
    assert.match(await page.locator('.policy-allow').innerText(), /^partner\.example/);
    assert.equal(await page.locator('form').count(), 1, 'only the header’s sign-out form: nothing to change here');
    assert.deepEqual(await axeViolations(page), []);

    const hidden = await createMailbox(server.admin);
    const notReached = await page.goto(url(`/console/mailboxes/${hidden}/policy`));
    assert.equal(notReached!.status(), 404, 'the policy of a mailbox the session does not reach is not found');
  });
});
