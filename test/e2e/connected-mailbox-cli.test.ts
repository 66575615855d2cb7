import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dovecotAccount, imapSource, secretsKey, sourceReaches } from '../support/connected-mailboxes';
import { runCliWith } from '../support/cli';
import { startDovecot, TestDovecot } from '../support/dovecot';
import { requireSystemPackage } from '../support/system-packages';
import { startTestServer, TestServer } from '../support/test-server';

/** docs/operators.md, "CLI": connecting, testing, pausing, resuming and removing an account from the command line. */
describe('connected mailbox CLI', { skip: requireSystemPackage('dovecot-imapd') }, () => {
  let dovecot: TestDovecot;
  let server: TestServer;
  const key = secretsKey();

  before(async () => {
    dovecot = await startDovecot();
    server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: key, ALCARTA_IMAP_LEASE_SECONDS: '5' } });
  });

  after(async () => {
    await server?.close();
    await dovecot?.close();
  });

  const cli = (args: string[], stdin?: string) =>
    runCliWith({ env: { ALCARTA_SECRETS_KEY: key }, stdin }, server.db.url, ...args);

  it('creates a connected mailbox from standard input, tests, pauses, resumes and removes its source', async () => {
    const account = await dovecotAccount(dovecot);
    const created = await cli(
      ['mailboxes', 'create', '--address', account.username, '--source-file', '-'],
      JSON.stringify(imapSource(dovecot, account)),
    );
    assert.equal(created.code, 0, created.stderr);
    assert.equal(created.stdout.includes(account.password), false, 'the password is never printed');
    const mailboxId = /mbx_[A-Za-z0-9_-]+/.exec(created.stdout)?.[0];
    assert.ok(mailboxId, created.stdout);
    await sourceReaches(server.admin, mailboxId, 'idle');
    // The listing reads the database directly, and shows what GET /v1/mailboxes shows.
    const listed = await cli(['mailboxes', 'list', '--json']);
    assert.equal(listed.code, 0, listed.stderr);
    const rest = (await server.admin.get('/v1/mailboxes')).body.mailboxes as Array<{
      mailbox_id: string;
      source?: object;
    }>;
    const fromCli = (JSON.parse(listed.stdout) as { mailboxes: Array<{ mailbox_id: string; source?: object }> })
      .mailboxes;
    const restSource = rest.find((m) => m.mailbox_id === mailboxId)?.source;
    const cliSource = fromCli.find((m) => m.mailbox_id === mailboxId)?.source;
    assert.deepEqual({ ...cliSource, lag_seconds: 0 }, { ...restSource, lag_seconds: 0 });
    assert.equal((cliSource as { state?: string }).state, 'idle');
    assert.match(
      (await cli(['mailboxes', 'list'])).stdout,
      new RegExp(`${mailboxId}.*source=127\\.0\\.0\\.1 \\(idle\\)`),
    );

    const tested = await cli(['mailboxes', 'source', 'test', mailboxId]);
    assert.equal(tested.code, 0, tested.stderr);
    assert.match(tested.stdout, /INBOX/);

    const paused = await cli(['mailboxes', 'source', 'pause', mailboxId]);
    assert.equal(paused.code, 0, paused.stderr);
    assert.equal((await server.admin.get(`/v1/mailboxes/${mailboxId}`)).body.source.state, 'paused');
    const resumed = await cli(['mailboxes', 'source', 'resume', mailboxId]);
    assert.equal(resumed.code, 0, resumed.stderr);
    await sourceReaches(server.admin, mailboxId, 'idle');

    await dovecot.addUser(account.username, `${account.password}-changed`);
    const failed = await cli(['mailboxes', 'source', 'test', mailboxId]);
    assert.equal(failed.code, 1, failed.stdout);
    assert.match(failed.stdout + failed.stderr, /source_auth_failed/);
    assert.equal((failed.stdout + failed.stderr).includes(account.password), false);

    const removed = await cli(['mailboxes', 'source', 'remove', mailboxId]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.equal((await server.admin.get(`/v1/mailboxes/${mailboxId}`)).body.source, undefined);
  });

  it('refuses a source it cannot use, with the reason, and creates nothing', async () => {
    const account = await dovecotAccount(dovecot);
    const refused = await cli(
      ['mailboxes', 'create', '--address', account.username, '--source-file', '-'],
      JSON.stringify(imapSource(dovecot, account, { auth: { password: 'wrong' } })),
    );
    assert.notEqual(refused.code, 0);
    assert.match(refused.stdout + refused.stderr, /source_auth_failed/);
    const rows = await server.db.query('SELECT 1 FROM mailboxes WHERE address = $1', [account.username]);
    assert.equal(rows.length, 0);
  });
});
