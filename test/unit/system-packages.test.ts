import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { skipVerdict } from '../support/skip-summary';
import { requireSystemPackage, SKIP_PREFIX, systemPackagesRequired } from '../support/system-packages';

const missing = () => false;
const installed = () => true;

/**
 * Suites that drive system packages skip on a machine without them, naming the package and how to
 * install it; where every package is required (CI=true or ALCARTA_TEST_REQUIRE_ALL=1) a missing
 * package fails instead, and so does any skip, so that a skip never hides a failure in CI.
 */
describe('system packages of the test suites', () => {
  it('an installed package lets the suite run', () => {
    assert.equal(requireSystemPackage('swaks', {}, installed), undefined);
    assert.equal(requireSystemPackage('swaks', { CI: 'true' }, installed), undefined);
  });

  it('a missing package skips locally, naming the Debian package and the install command', () => {
    const reason = requireSystemPackage('python3-aiosmtpd', {}, missing) ?? '';
    assert.ok(reason.startsWith(`${SKIP_PREFIX} python3-aiosmtpd`), reason);
    assert.match(reason, /apt-get install -y python3-aiosmtpd/);
    assert.match(requireSystemPackage('nginx-light', { CI: 'false' }, missing) ?? '', /apt-get install -y nginx-light/);
  });

  it('a missing package fails under CI=true or ALCARTA_TEST_REQUIRE_ALL=1', () => {
    assert.throws(() => requireSystemPackage('chromium', { CI: 'true' }, missing), /apt-get install -y chromium/);
    assert.throws(() => requireSystemPackage('curl', { ALCARTA_TEST_REQUIRE_ALL: '1' }, missing), /curl/);
    assert.equal(systemPackagesRequired({}), false);
    assert.equal(systemPackagesRequired({ ALCARTA_TEST_REQUIRE_ALL: '0' }), false);
  });

  it('the run sums up its skips by reason, and fails on any skip where every package is required', () => {
    const reason = requireSystemPackage('swaks', {}, missing)!;
    const skipped = [
      { file: '/repo/test/e2e/smtp-inbound.test.ts', name: 'inbound SMTP', reason },
      { file: '/repo/test/e2e/smtp-auth-tls.test.ts', name: 'inbound SMTP with AUTH', reason },
      { file: '/repo/test/e2e/other.test.ts', name: 'a test', reason: true },
    ];
    const local = skipVerdict(skipped, '/repo/test', {});
    assert.equal(local.fails, false);
    assert.match(local.lines[0], /^skipped: 3 tests or suites$/);
    assert.ok(
      local.lines.some((l) => l.includes(reason) && l.includes('e2e/smtp-auth-tls.test.ts, e2e/smtp-inbound.test.ts')),
    );
    assert.ok(local.lines.some((l) => l.includes('(no reason given)')));

    assert.equal(skipVerdict(skipped, '/repo/test', { CI: 'true' }).fails, true);
    assert.equal(skipVerdict(skipped, '/repo/test', { ALCARTA_TEST_REQUIRE_ALL: '1' }).fails, true);
    assert.deepEqual(skipVerdict([], '/repo/test', { CI: 'true' }), { lines: [], fails: false });
  });
});
