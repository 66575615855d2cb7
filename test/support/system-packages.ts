import { accessSync, constants, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { delimiter, join } from 'node:path';

/**
 * The Debian packages that some end-to-end suites drive as real parts: an SMTP client, a browser,
 * a proxy, an SMTP relay, an HTTP/2 client. Each entry says what the suites use it for and how to
 * tell whether it is installed.
 */
const SYSTEM_PACKAGES = {
  swaks: { use: 'the SMTP client of the inbound SMTP tests', installed: () => onPath('swaks') !== undefined },
  chromium: {
    use: 'the browser of the console, CORS and sign-in tests (ALCARTA_TEST_CHROMIUM points at another)',
    installed: () => existsSync(chromiumPath()),
  },
  'nginx-light': {
    use: 'the proxy and load balancer of the proxy and cluster tests',
    installed: () => nginxPath() !== undefined,
  },
  'python3-aiosmtpd': {
    use: "the outbound SMTP relay of the outbox and approval-mail tests (run with Debian's /usr/bin/python3)",
    installed: () => spawnSync('/usr/bin/python3', ['-c', 'import aiosmtpd']).status === 0,
  },
  openssl: {
    use: 'the certificate maker of the STARTTLS tests',
    installed: () => onPath('openssl') !== undefined,
  },
  'dovecot-imapd': {
    use: 'the IMAP server of the connected-mailbox tests (Dovecot, run with its own configuration)',
    installed: () => existsSync('/usr/sbin/dovecot') && existsSync('/usr/lib/dovecot/imap'),
  },
  'dovecot-submissiond': {
    use: "the submission server of the connected-mailbox tests (Dovecot's, relaying to the test relay)",
    installed: () => existsSync('/usr/lib/dovecot/submission'),
  },
  curl: {
    use: 'the HTTP/2 client of the odd-requests test (curl built with HTTP/2)',
    installed: () => /\bHTTP2\b/.test(spawnSync('curl', ['--version'], { encoding: 'utf8' }).stdout ?? ''),
  },
} satisfies Record<string, { use: string; installed: () => boolean }>;

export type SystemPackage = keyof typeof SYSTEM_PACKAGES;

/** The setting that makes every system package required, as CI does (CI=true does the same). */
export const REQUIRE_ALL_VARIABLE = 'ALCARTA_TEST_REQUIRE_ALL';

/** Whether a missing system package must fail the run instead of skipping (CI, or REQUIRE_ALL). */
export function systemPackagesRequired(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.CI === 'true' || env[REQUIRE_ALL_VARIABLE] === '1';
}

/** The first line of every skip reason this helper gives: the runner's summary groups by it. */
export const SKIP_PREFIX = 'needs the system package';

/**
 * Checks that Debian package `name` is installed, for the suites that drive it. Installed:
 * undefined. Missing: the reason to skip (naming the package and its install command), to pass as
 * `{ skip }` to `describe` or `it`, or to `t.skip`; under CI (see `systemPackagesRequired`) it
 * throws instead, so that a missing package fails the run rather than hiding its tests.
 */
export function requireSystemPackage(
  name: SystemPackage,
  env: NodeJS.ProcessEnv = process.env,
  installed: (name: SystemPackage) => boolean = (p) => SYSTEM_PACKAGES[p].installed(),
): string | undefined {
  if (installed(name)) return undefined;
  const reason = `${SKIP_PREFIX} ${name}, ${SYSTEM_PACKAGES[name].use}: install it with \`apt-get install -y ${name}\``;
  if (systemPackagesRequired(env)) {
    throw new Error(`${reason} (missing packages fail the run when CI=true or ${REQUIRE_ALL_VARIABLE}=1)`);
  }
  return reason;
}

/** Debian's Chromium, or ALCARTA_TEST_CHROMIUM. */
export function chromiumPath(): string {
  return process.env.ALCARTA_TEST_CHROMIUM ?? '/usr/bin/chromium';
}

/** The nginx binary: on PATH, or in the sbin directories a non-root PATH often lacks. */
export function nginxPath(): string | undefined {
  return onPath('nginx', ['/usr/sbin', '/usr/local/sbin', '/usr/local/nginx/sbin']);
}

function onPath(command: string, extraDirs: string[] = []): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), ...extraDirs].filter(Boolean);
  for (const dir of dirs) {
    const candidate = join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}
