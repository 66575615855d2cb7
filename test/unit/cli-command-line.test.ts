import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isReadCommand, parseCommandLine, UsageError } from '#app/cli/command-line.js';

describe('CLI command line', () => {
  it('understands every command with its flags, and --json anywhere', () => {
    assert.deepEqual(parseCommandLine(['migrate', '--json']), { name: 'migrate', json: true });
    assert.deepEqual(
      parseCommandLine([
        'tokens',
        'create',
        '--name',
        'ci',
        '--scopes',
        'mail:read, admin',
        '--mailboxes',
        '*',
        '--expires-at',
        '2027-01-01T00:00:00Z',
      ]),
      {
        name: 'tokens create',
        json: false,
        tokenName: 'ci',
        scopes: ['mail:read', 'admin'],
        mailboxes: ['*'],
        expiresAt: new Date('2027-01-01T00:00:00Z'),
      },
    );
    assert.deepEqual(parseCommandLine(['tokens', 'revoke', 'tok_1']), {
      name: 'tokens revoke',
      json: false,
      tokenId: 'tok_1',
    });
    assert.deepEqual(parseCommandLine(['grants', 'create', '--principal', 'group:ops', '--mailboxes', 'mbx_1,mbx_2']), {
      name: 'grants create',
      json: false,
      principal: 'group:ops',
      mailboxes: ['mbx_1', 'mbx_2'],
    });
    assert.deepEqual(parseCommandLine(['mailboxes', 'create', '--address', 'a@example.com']), {
      name: 'mailboxes create',
      json: false,
      address: 'a@example.com',
      mailboxName: null,
    });
    assert.deepEqual(parseCommandLine(['mailboxes', 'list', '--json']), { name: 'mailboxes list', json: true });
    for (const action of ['test', 'pause', 'resume', 'remove']) {
      assert.deepEqual(parseCommandLine(['mailboxes', 'source', action, 'mbx_1']), {
        name: `mailboxes source ${action}`,
        json: false,
        mailboxId: 'mbx_1',
      });
    }
  });

  it('reads a connected account from a JSON file, so that its secrets never appear on the command line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'alcarta-cli-'));
    try {
      const source = { kind: 'imap', host: 'imap.example.com', auth: { password: 'p' } };
      await writeFile(join(dir, 'source.json'), JSON.stringify(source));
      await writeFile(join(dir, 'broken.json'), '{"kind": ');
      assert.deepEqual(parseCommandLine(['mailboxes', 'source', 'set', 'mbx_1', '--file', join(dir, 'source.json')]), {
        name: 'mailboxes source set',
        json: false,
        mailboxId: 'mbx_1',
        source,
      });
      assert.deepEqual(
        parseCommandLine([
          'mailboxes',
          'create',
          '--address',
          'a@example.com',
          '--source-file',
          join(dir, 'source.json'),
        ]),
        { name: 'mailboxes create', json: false, address: 'a@example.com', mailboxName: null, source },
      );
      assert.throws(
        () => parseCommandLine(['mailboxes', 'source', 'set', 'mbx_1', '--file', join(dir, 'broken.json')]),
        /--file: .*broken\.json is not JSON/,
      );
      assert.throws(
        () => parseCommandLine(['mailboxes', 'source', 'set', 'mbx_1', '--file', join(dir, 'missing.json')]),
        /--file: .*missing\.json cannot be read \(ENOENT\)/,
      );
      assert.throws(() => parseCommandLine(['mailboxes', 'source', 'set', 'mbx_1']), /--file is required/);
      assert.throws(() => parseCommandLine(['mailboxes', 'source', 'test']), /needs a mailbox id/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses mistakes with a usage error that names them', () => {
    const cases: [string[], RegExp][] = [
      [['bogus'], /unknown command: bogus/],
      [['tokens', 'create', '--name', 'x'], /--scopes is required/],
      [
        ['tokens', 'create', '--name', 'x', '--scopes', 'admin', '--mailboxes', '*', '--expires-at', 'soon'],
        /ISO 8601/,
      ],
      [['tokens', 'revoke'], /needs a token id/],
      [['grants', 'revoke'], /needs a grant id/],
      [['mailboxes', 'list', '--no-such-flag'], /no-such-flag/],
    ];
    for (const [argv, message] of cases) {
      assert.throws(
        () => parseCommandLine(argv),
        (err: unknown) => err instanceof UsageError && message.test(err.message),
      );
    }
  });

  it('explains an unquoted * that the shell expanded into the names of files here', () => {
    const files = new Set(['Dockerfile', 'README.md', 'src']);
    const here = (name: string) => files.has(name);
    const cases: string[][] = [
      ['tokens', 'create', '--name', 'x', '--scopes', 'admin', '--mailboxes', 'Dockerfile', 'README.md', 'src'],
      ['grants', 'create', '--principal', 'group:ops', '--mailboxes', 'Dockerfile', 'README.md'],
      // A directory with one file: no stray words, only a file name for a mailbox id.
      ['grants', 'create', '--principal', 'group:ops', '--mailboxes', 'README.md'],
    ];
    for (const argv of cases) {
      assert.throws(
        () => parseCommandLine(argv, here),
        (err: unknown) =>
          err instanceof UsageError &&
          /file names \((Dockerfile|README\.md)/.test(err.message) &&
          err.message.includes("Quote it: --mailboxes '*'"),
        argv.join(' '),
      );
    }
    assert.throws(
      () => parseCommandLine(['grants', 'create', '--principal', 'group:ops', '--mailboxes', 'mbx_1', 'mbx_2'], here),
      (err: unknown) => err instanceof UsageError && /unexpected argument: mbx_2 .*commas/.test(err.message),
    );
    // Quoted, or ids that happen to be file names of no kind: taken as given.
    assert.deepEqual(parseCommandLine(['grants', 'create', '--principal', 'group:ops', '--mailboxes', '*'], here), {
      name: 'grants create',
      json: false,
      principal: 'group:ops',
      mailboxes: ['*'],
    });
    assert.deepEqual(
      parseCommandLine(['grants', 'create', '--principal', 'group:ops', '--mailboxes', 'mbx_1,nowhere'], here),
      { name: 'grants create', json: false, principal: 'group:ops', mailboxes: ['mbx_1', 'nowhere'] },
    );
  });

  it('tells the listings (run without the application) from the commands that change something', () => {
    const read = ['tokens list', 'grants list', 'mailboxes list'];
    for (const argv of [
      ['migrate'],
      ['tokens', 'list'],
      ['grants', 'list'],
      ['mailboxes', 'list'],
      ['tokens', 'revoke', 't'],
    ]) {
      const command = parseCommandLine(argv);
      assert.equal(isReadCommand(command), read.includes(command.name), argv.join(' '));
    }
  });

  it('understands the webhooks commands, and refuses them without what they need', () => {
    assert.deepEqual(
      parseCommandLine([
        'webhooks',
        'create',
        '--url',
        'https://hooks.example.com/a',
        '--events',
        'message_received, request_created',
        '--mailboxes',
        '*',
        '--description',
        'billing',
        '--json',
      ]),
      {
        name: 'webhooks create',
        json: true,
        url: 'https://hooks.example.com/a',
        events: ['message_received', 'request_created'],
        mailboxes: ['*'],
        description: 'billing',
      },
    );
    assert.deepEqual(parseCommandLine(['webhooks', 'list']), { name: 'webhooks list', json: false });
    for (const action of ['delete', 'rotate-secret', 'deliveries'] as const) {
      assert.deepEqual(parseCommandLine(['webhooks', action, 'whk_1']), {
        name: `webhooks ${action}`,
        json: false,
        webhookId: 'whk_1',
      });
      assert.throws(
        () => parseCommandLine(['webhooks', action]),
        new UsageError(`webhooks ${action} needs a webhook id`),
      );
    }
    assert.throws(
      () => parseCommandLine(['webhooks', 'create', '--url', 'https://h.example/a', '--mailboxes', 'mbx_1']),
      new UsageError('--events is required'),
    );
    assert.throws(
      () =>
        parseCommandLine(
          ['webhooks', 'create', '--url', 'u', '--events', 'e', '--mailboxes', 'mbx_1', 'mbx_2'],
          () => false,
        ),
      /unexpected argument: mbx_2/,
    );
  });

  it('takes only the flags given to webhooks update as the change, and needs a cursor to replay', () => {
    assert.deepEqual(parseCommandLine(['webhooks', 'update', 'whk_1', '--disable']), {
      name: 'webhooks update',
      json: false,
      webhookId: 'whk_1',
      changes: { enabled: false },
    });
    assert.deepEqual(
      parseCommandLine([
        'webhooks',
        'update',
        'whk_1',
        '--url',
        'https://hooks.example.com/b',
        '--events',
        'message_received, request_created',
        '--mailboxes',
        '*',
        '--description',
        '',
        '--enable',
        '--json',
      ]),
      {
        name: 'webhooks update',
        json: true,
        webhookId: 'whk_1',
        changes: {
          url: 'https://hooks.example.com/b',
          events: ['message_received', 'request_created'],
          mailbox_ids: ['*'],
          description: '',
          enabled: true,
        },
      },
    );
    assert.deepEqual(parseCommandLine(['webhooks', 'replay', 'whk_1', '--since-cursor', '42']), {
      name: 'webhooks replay',
      json: false,
      webhookId: 'whk_1',
      sinceCursor: '42',
    });
    const cases: [string[], RegExp][] = [
      [['webhooks', 'update', '--disable'], /^webhooks update needs a webhook id$/],
      [['webhooks', 'update', 'whk_1'], /needs something to change: --url, --events/],
      [['webhooks', 'update', 'whk_1', '--enable', '--disable'], /--enable and --disable exclude each other/],
      [['webhooks', 'update', 'whk_1', '--mailboxes', 'mbx_1', 'mbx_2'], /unexpected argument: mbx_2/],
      [['webhooks', 'update', 'whk_1', '--mailboxes', 'README.md'], /file names \(README\.md\)/],
      [['webhooks', 'replay', 'whk_1'], /^--since-cursor is required$/],
      [['webhooks', 'replay', '--since-cursor', '1'], /^webhooks replay needs a webhook id$/],
    ];
    for (const [argv, message] of cases) {
      assert.throws(
        () => parseCommandLine(argv, (name) => name === 'README.md'),
        (err: unknown) => err instanceof UsageError && message.test(err.message),
        argv.join(' '),
      );
    }
  });
});
