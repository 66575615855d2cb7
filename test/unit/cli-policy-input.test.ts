import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseCommandLine, UsageError, WriteCommand } from '#app/cli/command-line.js';
import { validateInput } from '#app/cli/input-validation.js';
import { describeFailure } from '#app/cli/commands.js';
import { BAD_POLICIES, GOOD_POLICY } from '../support/policies';

/**
 * `alcarta mailboxes policy get|set` (docs/operators.md): the command line, and the checks a policy
 * file passes before the CLI opens the database: the same DTO and policy rules as
 * `PUT /v1/mailboxes/{id}/policy`, so every refusal names the same field (test/e2e/policy-admin
 * runs one of each kind through a real CLI process and the server).
 */
describe('CLI mailboxes policy', () => {
  let dir: string;
  const policyCommand = async (body: unknown): Promise<WriteCommand> => {
    const file = join(dir, 'policy.json');
    await writeFile(file, JSON.stringify(body));
    return parseCommandLine(['mailboxes', 'policy', 'set', 'mbx_1', '--file', file, '--json']) as WriteCommand;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'alcarta-policy-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('parses get and set with --json; set needs a mailbox id and --file', async () => {
    assert.deepEqual(parseCommandLine(['mailboxes', 'policy', 'get', 'mbx_1', '--json']), {
      name: 'mailboxes policy get',
      json: true,
      mailboxId: 'mbx_1',
    });
    assert.deepEqual(await policyCommand(GOOD_POLICY), {
      name: 'mailboxes policy set',
      json: true,
      mailboxId: 'mbx_1',
      policy: GOOD_POLICY,
    });
    assert.throws(() => parseCommandLine(['mailboxes', 'policy', 'get']), /mailboxes policy get needs a mailbox id/);
    assert.throws(() => parseCommandLine(['mailboxes', 'policy', 'set', 'mbx_1']), /--file is required/);
    assert.throws(() => parseCommandLine(['mailboxes', 'policy', 'delete', 'mbx_1']), UsageError);
    const list = join(dir, 'list.json');
    await writeFile(list, '[]');
    assert.throws(
      () => parseCommandLine(['mailboxes', 'policy', 'set', 'mbx_1', '--file', list]),
      /must hold a JSON object \(the policy\)/,
    );
  });

  it('accepts a good policy file', async () => {
    await validateInput(await policyCommand(GOOD_POLICY));
  });

  for (const bad of BAD_POLICIES) {
    it(`refuses ${bad.what}, naming ${bad.field}`, async () => {
      const command = await policyCommand(bad.body);
      await assert.rejects(validateInput(command), (err: unknown) => {
        assert.equal((err as { reason?: string }).reason, bad.reason);
        // The field, in the message or after it.
        assert.ok(describeFailure(err).includes(bad.field), describeFailure(err));
        return true;
      });
    });
  }
});
