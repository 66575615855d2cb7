import assert from 'node:assert/strict';
import { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { SMTPServer } from 'smtp-server';
import { callOk, connectMcp } from '../support/mcp';
import { createTestDatabase, TestDatabase } from '../support/database';
import { freePort, scrubbed, spawnServer, SpawnedServer } from '../support/spawned-server';
import { createMailbox, createToken, randomSecret } from '../support/test-server';
import { recordSecret } from '../support/test-logs';
import { RestClient } from '../support/rest';
import { waitFor } from '../support/wait-for';

/**
 * A server started with PORT and no ALCARTA_PUBLIC_URL, as a newcomer runs it: the URLs it hands
 * out (websocket URLs, approval links) point at the port it listens on, and its start-up log
 * names where HTTP, SMTP and the console are.
 */
describe('start-up on a port of its own without ALCARTA_PUBLIC_URL', () => {
  let db: TestDatabase;
  let server: SpawnedServer;
  let smtpPort: number;
  let admin: RestClient;
  /** Raw messages the server relayed (a local SMTP server stands in for the relay). */
  const relayed: string[] = [];
  const relay = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      let raw = '';
      stream.setEncoding('utf8').on('data', (chunk: string) => (raw += chunk));
      stream.on('end', () => {
        relayed.push(raw);
        callback();
      });
    },
  });

  const logLines = () =>
    server
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);

  before(async () => {
    db = await createTestDatabase();
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const relayPort = (relay.server.address() as AddressInfo).port;
    smtpPort = await freePort();
    const adminToken = randomSecret();
    server = await spawnServer({
      DATABASE_URL: db.url,
      ALCARTA_PUBLIC_URL: undefined,
      ALCARTA_BOOTSTRAP_TOKEN: adminToken,
      ALCARTA_SMTP_PORT: String(smtpPort),
      ALCARTA_SMTP_RELAY_URL: `smtp://127.0.0.1:${relayPort}`,
      ALCARTA_LOG_LEVEL: 'info',
    });
    admin = new RestClient(server.url, adminToken);
  });

  after(async () => {
    await server?.stop('SIGTERM');
    await new Promise<void>((resolve) => relay.close(() => resolve()));
    await db?.drop();
  });

  const port = () => new URL(server.url).port;

  it('hands out websocket URLs on the listening port', async () => {
    const mailboxId = await createMailbox(admin);
    const token = await createToken(admin, { scopes: ['mail:read'], mailboxes: [mailboxId] });
    const client = await connectMcp(server.url, token.secret);
    try {
      const wait = await callOk(client, 'monitor_inbox', {
        mailbox_id: mailboxId,
        timeout_seconds: 30,
        delivery: 'websocket',
      });
      const url = new URL(wait.websocket_url as string);
      assert.equal(url.hostname, 'localhost');
      assert.equal(url.port, port(), `websocket URL ${url.origin}${url.pathname}`);
    } finally {
      await client.close();
    }
  });

  it('mails approval links on the listening port', async () => {
    const mailboxId = await createMailbox(admin);
    const set = await admin.request('PUT', `/v1/mailboxes/${mailboxId}/approvers`, {
      emails: ['approver@example.com'],
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    const token = await createToken(admin, { scopes: ['approvals:read'], mailboxes: [mailboxId] });
    const client = await connectMcp(server.url, token.secret);
    try {
      await callOk(client, 'request_approval', { mailbox_id: mailboxId, title: 'Deploy' });
    } finally {
      await client.close();
    }
    const link = await waitFor(
      'the approval mail',
      () => relayed.map((raw) => /(https?:\/\/[^\s/]+)\/console\/links\/([A-Za-z0-9_-]+)/.exec(raw)).find(Boolean),
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    recordSecret('approval-link token (mail)', link[2]);
    assert.equal(link[1], `http://localhost:${port()}`);
  });

  it('logs the HTTP, SMTP and console URLs at start', () => {
    const lines = logLines();
    const find = (key: string) => lines.find((line) => key in line);
    const http = find('http_url');
    assert.ok(http, `no http_url line in:\n${scrubbed(server.stdout())}`);
    assert.equal(http.http_url, `http://localhost:${port()}`);
    assert.equal(http.mcp_url, `http://localhost:${port()}/mcp`);
    assert.match(String(http.msg), new RegExp(`:${port()}\\b`));
    const smtp = find('smtp_url');
    assert.ok(smtp, 'no smtp_url line');
    assert.equal(smtp.smtp_url, `smtp://localhost:${smtpPort}`);
    assert.match(String(smtp.msg), new RegExp(`:${smtpPort}\\b`));
    const consoleLine = find('console_url');
    assert.ok(consoleLine, 'no console_url line');
    assert.equal(consoleLine.console_url, `http://localhost:${port()}/console`);
    assert.match(String(consoleLine.msg), new RegExp(`http://localhost:${port()}/console`));
  });
});
