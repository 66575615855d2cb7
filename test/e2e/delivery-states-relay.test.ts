import assert from 'node:assert/strict';
import { ChildProcess, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { freePort } from '#app/common/net.js';
import { callOk, connectMcp } from '../support/mcp';
import { activeWaits } from '../support/metrics';
import { requireSystemPackage } from '../support/system-packages';
import { createMailbox, createToken, startTestServer, TestServer } from '../support/test-server';
import { waitFor } from '../support/wait-for';

/** Long enough for a delivery on a busy machine, short enough to end as a result, not an SDK timeout. */
const BLOCK = 50;

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * docs/mail.md with a real relay: Debian's aiosmtpd (`python3-aiosmtpd`, a server nobody here
 * wrote) with its Debugging handler, which prints every message it accepts. A request wait with
 * `delivery_states` started before the approval returns once the outbox worker's `sent` commits,
 * with that `message_delivery_changed` event, and the request, the message and the wait result
 * agree on the delivery.
 */
describe('delivery_states with a real relay', { skip: requireSystemPackage('python3-aiosmtpd') }, () => {
  let relay: ChildProcess;
  let relayOutput = '';
  let server: TestServer;
  let agent: Client;
  let mailbox: string;

  before(async () => {
    const port = await freePort();
    relay = spawn('/usr/bin/python3', ['-u', '-m', 'aiosmtpd', '-n', '-l', `127.0.0.1:${port}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    relay.stdout!.on('data', (chunk: Buffer) => (relayOutput += chunk.toString('utf8')));
    relay.stderr!.on('data', (chunk: Buffer) => (relayOutput += chunk.toString('utf8')));
    await waitFor(`aiosmtpd on port ${port} (python3-aiosmtpd installed?)`, () => listening(port));
    server = await startTestServer({
      env: {
        ALCARTA_SMTP_PORT: 'off',
        ALCARTA_SMTP_RELAY_URL: `smtp://127.0.0.1:${port}`,
        ALCARTA_WAIT_RECHECK_SECONDS: '30',
      },
    });
    mailbox = await createMailbox(server.admin);
    const token = await createToken(server.admin, {
      scopes: ['mail:send', 'mail:read', 'approvals:read'],
      mailboxes: [mailbox],
    });
    agent = await connectMcp(server.url, token.secret);
  });

  after(async () => {
    await agent?.close();
    await server?.close();
    relay?.kill();
  });

  it('a blocked wait for ["sent", "failed", "bounced"] returns with the sent event once the relay accepted the mail', async () => {
    const subject = `Relay check ${Date.now()}`;
    const { request_id: id } = await callOk(agent, 'send_email', {
      mailbox_id: mailbox,
      to: ['cfo@example.org'],
      subject,
      text: 'Numbers attached.',
    });
    const pending = callOk(agent, 'monitor_approval', {
      request_id: id,
      delivery_states: ['sent', 'failed', 'bounced'],
      timeout_seconds: BLOCK,
    });
    await waitFor('a parked request wait', async () => (await activeWaits(server.url, 'request')) === 1);
    const approved = await server.admin.post(`/v1/requests/${id}/approve`, {});
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assert.ok(
      ['queued', 'sending', 'sent'].includes(approved.body.delivery?.status),
      `the approval shows the queued delivery: ${JSON.stringify(approved.body)}`,
    );

    const result = await pending;
    assert.equal(result.matched, true, JSON.stringify(result));
    const [event] = result.events;
    assert.equal(result.events.length, 1);
    assert.deepEqual(
      { ...event, changed_at: undefined },
      {
        type: 'message_delivery_changed',
        mailbox_id: mailbox,
        message_id: approved.body.sent_message_id,
        request_id: id,
        status: 'sent',
        changed_at: undefined,
      },
    );
    const [{ delivery }] = result.requests;
    assert.deepEqual(result.requests, [{ request_id: id, state: 'approved', delivery }]);
    assert.equal(delivery.status, 'sent');
    assert.ok(delivery.attempts >= 1, JSON.stringify(delivery));
    assert.ok(!Number.isNaN(Date.parse(delivery.last_attempt_at)), JSON.stringify(delivery));
    assert.ok(relayOutput.includes(subject), `the relay received the mail:\n${relayOutput}`);

    assert.deepEqual((await callOk(agent, 'get_request', { request_id: id })).delivery, delivery);
    const message = await callOk(agent, 'get_message', { message_id: approved.body.sent_message_id });
    assert.deepEqual(message.delivery, delivery);

    assert.deepEqual(
      await callOk(agent, 'monitor_approval', { request_id: id, delivery_states: ['sent'], timeout_seconds: BLOCK }),
      result,
      'level-triggered: a wait for sent returns the same at once',
    );
  });
});
