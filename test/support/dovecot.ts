import { ChildProcess, execFile, spawn } from 'node:child_process';
import { chownSync, existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ImapFlow } from 'imapflow';
import { freePort } from '#app/common/net.js';
import { testCertificate } from './tls-certificates';
import { requireSystemPackage } from './system-packages';
import { recordSecret } from './test-logs';
import { waitFor } from './wait-for';
import { listening } from './tcp-listening';

const run = promisify(execFile);

export const DOVECOT_BINARY = '/usr/sbin/dovecot';
export const DOVEADM_BINARY = '/usr/bin/doveadm';

const running = new Set<ChildProcess>();
// A test that failed half-way must not leave a Dovecot behind (its children exit with the master).
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export interface DovecotOptions {
  /** The SMTP server the submission service relays to (e.g. a TestSmtpRelay: host 127.0.0.1, its port). */
  relay?: { host: string; port: number };
  /**
   * XOAUTH2 and OAUTHBEARER beside PLAIN/LOGIN: bearer tokens are checked by RFC 7662 introspection
   * (POST) at this URL, credentials of the introspecting client in its userinfo part; the token's
   * `sub` must be the IMAP username.
   */
  oauth2?: {
    introspectionUrl: string;
    /**
     * The bearer mechanisms offered (default both). Outlook.com offers only XOAUTH2; imapflow
     * prefers OAUTHBEARER when offered, so a test of XOAUTH2 itself offers only that one.
     */
    mechanisms?: Array<'xoauth2' | 'oauthbearer'>;
  };
  /**
   * IMAP connections Dovecot must hold at once, beyond its defaults (100 processes per service, 1,000
   * clients per process): raises the limits that bind first for many accounts on one address, for
   * benchmarks. Unset: Dovecot's defaults. (Sessions in IDLE also need as many inotify instances of
   * Dovecot's user: fs.inotify.max_user_instances is the host's to raise.)
   */
  connections?: number;
}

export interface MailSummary {
  uid: number;
  /** The Message-ID header (with its angle brackets), or undefined. */
  messageId: string | undefined;
  subject: string | undefined;
}

/**
 * Debian's Dovecot (a real IMAP and submission server nobody here wrote) in a temporary directory,
 * with a configuration of its own, listening on free loopback ports that stay the same across
 * stop/start. Users live in a passwd-file; every user's mail is a maildir under the directory.
 */
export class TestDovecot {
  readonly host = '127.0.0.1';
  private process: ChildProcess | undefined;
  private output = '';
  /** One logged-in IMAP session per user, the "second client" that delivers and reads mail. */
  private readonly sessions = new Map<string, Promise<ImapFlow>>();
  private readonly passwords = new Map<string, string>();
  /** The mtime (seconds) last given to the passwd-file. */
  private passwdStamp = 0;
  /** The self-signed certificate (PEM) of the TLS ports, for a client that must trust it. */
  certFile = '';
  private certDir = '';

  private constructor(
    readonly dir: string,
    readonly imapPort: number,
    readonly imapsPort: number,
    readonly submissionPort: number,
  ) {}

  static async start(options: DovecotOptions = {}): Promise<TestDovecot> {
    const dir = await mkdtemp(join(tmpdir(), 'alcarta-dovecot-'));
    // Dovecot's own processes run as the `dovecot` and `dovenull` users: they must reach the files.
    await chmod(dir, 0o755);
    const [imapPort, imapsPort, submissionPort] = await distinctFreePorts(3);
    const dovecot = new TestDovecot(dir, imapPort, imapsPort, submissionPort);
    await dovecot.configure(options);
    await dovecot.start();
    return dovecot;
  }

  private get configFile(): string {
    return join(this.dir, 'dovecot.conf');
  }

  private get logFile(): string {
    return join(this.dir, 'dovecot.log');
  }

  private get passwdFile(): string {
    return join(this.dir, 'users');
  }

  /** The home directory of a user; its INBOX is the maildir `<home>/Maildir`. */
  homeOf(username: string): string {
    return join(this.dir, 'home', username);
  }

  private async configure(options: DovecotOptions): Promise<void> {
    const { certFile, keyFile, dir: certDir } = await testCertificate();
    this.certFile = certFile;
    this.certDir = certDir;
    await mkdir(join(this.dir, 'run'));
    await mkdir(join(this.dir, 'state'));
    await mkdir(join(this.dir, 'home'));
    await writeFile(this.passwdFile, '');
    await writeFile(this.logFile, '');
    const root = process.getuid?.() === 0;
    // As root Dovecot drops to its packaged users; otherwise everything runs as whoever runs the tests.
    const mailUser = root ? 'dovecot' : userInfo().username;
    if (root) {
      const { uid, gid } = idsOf('dovecot');
      chownSync(join(this.dir, 'home'), uid, gid);
      chownSync(join(this.dir, 'state'), uid, gid);
    }
    const oauth2File = join(this.dir, 'oauth2.conf');
    if (options.oauth2) {
      recordSecret('Dovecot introspection URL', options.oauth2.introspectionUrl);
      await writeFile(
        oauth2File,
        [
          'introspection_mode = post',
          `introspection_url = ${options.oauth2.introspectionUrl}`,
          'username_attribute = sub',
          'active_attribute = active',
          'active_value = true',
          '',
        ].join('\n'),
      );
    }
    const bearerMechanisms = options.oauth2 ? (options.oauth2.mechanisms ?? ['xoauth2', 'oauthbearer']).join(' ') : '';
    const relay = options.relay ?? { host: '127.0.0.1', port: 25 };
    const config = `
base_dir = ${this.dir}/run
state_dir = ${this.dir}/state
instance_name = alcarta-test-${this.imapPort}
protocols = imap submission
listen = 127.0.0.1
log_path = ${this.logFile}
auth_verbose = yes
# Refused sign-ins answer at once (the default waits 2 s): tests of refusals stay fast.
auth_failure_delay = 0
hostname = mail.example.test
default_internal_user = ${mailUser}
default_login_user = ${root ? 'dovenull' : mailUser}
first_valid_uid = 100
disable_plaintext_auth = no
ssl = yes
ssl_cert = <${certFile}
ssl_key = <${keyFile}
${existsSync('/usr/share/dovecot/dh.pem') ? 'ssl_dh = </usr/share/dovecot/dh.pem' : ''}
auth_mechanisms = plain login ${bearerMechanisms}
mail_location = maildir:~/Maildir
# Test mail need not survive a power cut; without fsync an APPEND costs a fraction of the time.
mail_fsync = never
# An IDLE session learns of new mail from inotify; when the watch misses it (seen with the first
# APPEND into a brand-new maildir racing the start of IDLE), Dovecot checks the folder itself only
# every 30 s by default. Every second here, so that a missed notification cannot pass for a slow wake.
mailbox_idle_check_interval = 1 secs
mail_home = ${this.dir}/home/%u
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u ${this.passwdFile}
  mechanisms = plain login
}
${options.connections ? connectionLimits(options.connections) : ''}
${options.oauth2 ? `passdb {\n  driver = oauth2\n  mechanisms = ${bearerMechanisms}\n  args = ${oauth2File}\n}` : ''}
userdb {
  driver = static
  args = uid=${mailUser} gid=${root ? 'dovecot' : userInfo().gid} allow_all_users=yes
}
namespace inbox {
  inbox = yes
  separator = /
  mailbox Sent {
    special_use = \\Sent
  }
}
submission_relay_host = ${relay.host}
submission_relay_port = ${relay.port}
submission_relay_ssl = no
submission_relay_trusted = no
service imap-login {
  chroot =
  inet_listener imap {
    port = ${this.imapPort}
  }
  inet_listener imaps {
    port = ${this.imapsPort}
    ssl = yes
  }
}
service submission-login {
  chroot =
  inet_listener submission {
    port = ${this.submissionPort}
  }
}
service pop3-login {
  chroot =
}
# Dovecot slows every sign-in from an address after a refused one (anvil's auth penalty, up to 15 s);
# a penalty socket nobody may open turns that off, as Dovecot's documentation says.
service anvil {
  unix_listener anvil-auth-penalty {
    mode = 0
  }
}
service stats {
  unix_listener stats-reader {
    mode = 0666
  }
  unix_listener stats-writer {
    mode = 0666
  }
}
`;
    await writeFile(this.configFile, config);
  }

  /** Dovecot's log (every process's), to print when a test fails. */
  logs(): string {
    return `${this.output}${existsSync(this.logFile) ? readFileSync(this.logFile, 'utf8') : ''}`;
  }

  /** Starts Dovecot (again) on its ports, with the same users and mail; nothing to do while it runs. */
  async start(): Promise<void> {
    if (this.running) return;
    const child = spawn(DOVECOT_BINARY, ['-c', this.configFile, '-F'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.process = child;
    running.add(child);
    child.once('exit', () => running.delete(child));
    child.stdout.setEncoding('utf8').on('data', (s: string) => (this.output += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (this.output += s));
    let exited = false;
    child.once('exit', () => (exited = true));
    await waitFor(
      'Dovecot to listen on its IMAP, IMAPS and submission ports',
      async () => {
        if (exited) throw new Error(`dovecot exited: ${this.logs()}`);
        const ports = [this.imapPort, this.imapsPort, this.submissionPort];
        return (await Promise.all(ports.map(listening))).every(Boolean);
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
  }

  /** Stops Dovecot cleanly (SIGTERM): clients are disconnected, the ports refuse connections. */
  async stop(): Promise<void> {
    await this.end('SIGTERM');
  }

  /** Kills Dovecot's master process (SIGKILL), as a crash does; its children notice and exit. */
  async kill(): Promise<void> {
    await this.end('SIGKILL');
  }

  private async end(signal: NodeJS.Signals): Promise<void> {
    await this.closeSessions();
    const child = this.process;
    this.process = undefined;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill(signal);
      await exited;
    }
    // The master's children (anvil, auth, imap, ...) notice its end by themselves and may outlive it
    // for a while on a busy machine; one still holding its socket makes the next start fail.
    await waitFor("Dovecot's processes to end", async () => (await this.instanceProcesses()).length === 0, {
      timeoutMs: 20_000,
      intervalMs: 50,
    });
    await waitFor(
      "Dovecot's ports to close",
      async () => {
        const ports = [this.imapPort, this.imapsPort, this.submissionPort];
        return !(await Promise.all(ports.map(listening))).some(Boolean);
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    );
  }

  /** The processes of this instance: Dovecot titles each `dovecot-<instance_name>/<service>`. */
  private async instanceProcesses(): Promise<number[]> {
    const title = `dovecot-alcarta-test-${this.imapPort}/`;
    const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
    const titles = await Promise.all(pids.map((pid) => readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')));
    return pids.filter((_, i) => titles[i].startsWith(title)).map(Number);
  }

  /** Stops Dovecot and removes its directory (mail, users, logs). */
  async close(): Promise<void> {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
    await rm(this.certDir, { recursive: true, force: true });
  }

  /** Adds a user (or changes its password); `username` is the full address, e.g. support@example.test. */
  async addUser(username: string, password: string): Promise<void> {
    recordSecret('Dovecot user password', password);
    this.passwords.set(username, password);
    const lines = [...this.passwords].map(([user, pass]) => `${user}:{PLAIN}${pass}::::::`);
    await writeFile(this.passwdFile, `${lines.join('\n')}\n`);
    // Dovecot rereads the passwd-file when its mtime (in whole seconds) or size changes: a password
    // changed within the same second, to one as long, must still move the mtime on.
    this.passwdStamp = Math.max(this.passwdStamp + 1, Math.floor(Date.now() / 1000));
    await utimes(this.passwdFile, this.passwdStamp, this.passwdStamp);
    await this.closeSession(username);
    // It also looks at the file at most once a second: wait until the new password signs in.
    if (this.running) {
      await waitFor(`Dovecot to accept the new password of ${username}`, () => this.signsIn(username, password), {
        intervalMs: 100,
      });
    }
  }

  private get running(): boolean {
    return this.process !== undefined && this.process.exitCode === null && this.process.signalCode === null;
  }

  /** Whether `username` signs in with `password` over plain IMAP (a throwaway session). */
  private async signsIn(username: string, password: string): Promise<boolean> {
    const client = new ImapFlow({
      host: this.host,
      port: this.imapPort,
      secure: false,
      doSTARTTLS: false,
      auth: { user: username, pass: password },
      logger: false,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.logout();
      return true;
    } catch {
      client.close();
      return false;
    }
  }

  private async closeSession(username: string): Promise<void> {
    const session = this.sessions.get(username);
    this.sessions.delete(username);
    await session?.then((client) => client.logout()).catch(() => undefined);
  }

  /** An IMAP session of `username` (plain IMAP), logged in with its password; one per user, kept. */
  private session(username: string): Promise<ImapFlow> {
    let session = this.sessions.get(username);
    if (!session) {
      const password = this.passwords.get(username);
      if (password === undefined) throw new Error(`no such Dovecot user: ${username} (addUser first)`);
      const client = new ImapFlow({
        host: this.host,
        port: this.imapPort,
        secure: false,
        doSTARTTLS: false,
        auth: { user: username, pass: password },
        logger: false,
      });
      // A session that dropped (Dovecot stopped) is forgotten; the next call signs in again.
      client.on('close', () => {
        if (this.sessions.get(username) === session) this.sessions.delete(username);
      });
      client.on('error', () => undefined);
      session = client.connect().then(() => client);
      session.catch(() => this.sessions.delete(username));
      this.sessions.set(username, session);
    }
    return session;
  }

  private async closeSessions(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(sessions.map((s) => s.then((client) => client.logout()).catch(() => undefined)));
  }

  /** Creates `folder` for `username` if it does not exist yet. */
  async createFolder(username: string, folder: string): Promise<void> {
    const client = await this.session(username);
    if (folder.toUpperCase() === 'INBOX') return;
    const existing = await client.list();
    if (!existing.some((box) => box.path === folder)) await client.mailboxCreate(folder);
  }

  /**
   * Delivers `raw` into `folder` (created when missing) as another client would: an IMAP APPEND
   * from the user's own session. Returns the message's UID.
   */
  async append(username: string, folder: string, raw: string | Buffer): Promise<number> {
    const [uid] = await this.appendMany(username, folder, [raw]);
    return uid;
  }

  /** `append` for many messages, in order, over the same session. Returns their UIDs. */
  async appendMany(username: string, folder: string, raws: Iterable<string | Buffer>): Promise<number[]> {
    await this.createFolder(username, folder);
    const client = await this.session(username);
    const uids: number[] = [];
    for (const raw of raws) {
      const result = await client.append(folder, raw);
      if (!result || typeof result.uid !== 'number') throw new Error(`APPEND to ${folder} returned no UID`);
      uids.push(result.uid);
    }
    return uids;
  }

  /** What is in `folder`, by UID. */
  async messages(username: string, folder: string): Promise<MailSummary[]> {
    const client = await this.session(username);
    const lock = await client.getMailboxLock(folder, { readOnly: true });
    try {
      const summaries: MailSummary[] = [];
      if ((client.mailbox && client.mailbox.exists) === 0) return summaries;
      for await (const message of client.fetch('1:*', { uid: true, envelope: true })) {
        summaries.push({
          uid: message.uid,
          messageId: message.envelope?.messageId,
          subject: message.envelope?.subject,
        });
      }
      return summaries.sort((a, b) => a.uid - b.uid);
    } finally {
      lock.release();
    }
  }

  /** The UIDVALIDITY of `folder`, as a client reads it on SELECT. */
  async uidValidity(username: string, folder: string): Promise<bigint> {
    const client = await this.session(username);
    const status = await client.status(folder, { uidValidity: true });
    if (!status || status.uidValidity === undefined) throw new Error(`no UIDVALIDITY for ${folder}`);
    return status.uidValidity;
  }

  /**
   * Empties `folder` and gives it a new UIDVALIDITY, as deleting and creating it again does: a
   * client that knew the folder must forget its UIDs. Other folders use IMAP DELETE and CREATE.
   * INBOX cannot be deleted over IMAP (RFC 3501), so for INBOX Dovecot's own admin tool expunges
   * every message and sets a new UIDVALIDITY (`doveadm expunge`, `doveadm mailbox update
   * --uid-validity`) while the server runs; a session that has INBOX selected is then disconnected
   * by Dovecot, as a real server does when a mailbox is replaced under it. (INBOX's next UID goes
   * on from where it was: only the UIDVALIDITY says the old UIDs are void, which is all RFC 3501
   * promises a client.)
   */
  async recreateFolder(username: string, folder: string): Promise<void> {
    const before = await this.uidValidity(username, folder);
    if (folder.toUpperCase() !== 'INBOX') {
      const client = await this.session(username);
      await client.mailboxDelete(folder);
      await client.mailboxCreate(folder);
    } else {
      // Dovecot disconnects sessions that have INBOX selected: ours leaves first, not mid-command.
      await this.closeSession(username);
      await this.doveadm(['expunge', '-u', username, 'mailbox', 'INBOX', 'all']);
      const next = BigInt(Math.max(Number(before) + 1, Math.floor(Date.now() / 1000)));
      await this.doveadm(['mailbox', 'update', '-u', username, '--uid-validity', String(next), 'INBOX']);
    }
    await waitFor(`${folder} of ${username} to get a new UIDVALIDITY`, async () => {
      return (await this.uidValidity(username, folder)) !== before;
    });
  }

  private async doveadm(args: string[]): Promise<void> {
    await run(DOVEADM_BINARY, ['-c', this.configFile, ...args], { timeout: 30_000 });
  }
}

/**
 * Why the Dovecot suites must skip (a package is missing), or undefined: pass it as `{ skip }` to
 * `describe`. Under CI a missing package throws instead (see requireSystemPackage).
 */
export function dovecotMissing(): string | undefined {
  return requireSystemPackage('dovecot-imapd') ?? requireSystemPackage('dovecot-submissiond');
}

/** Starts Dovecot (see TestDovecot); `close()` when done. */
export async function startDovecot(options: DovecotOptions = {}): Promise<TestDovecot> {
  const missing = dovecotMissing();
  if (missing) throw new Error(missing);
  return TestDovecot.start(options);
}

/**
 * The settings that let Dovecot hold `connections` IMAP sessions from one address: every login
 * (imap-login serves one connection per process) and every session (one imap process each) is a
 * process, and each of them is a client of the log, anvil, stats and auth services.
 */
function connectionLimits(connections: number): string {
  const processes = connections + 100;
  return [
    `default_process_limit = ${processes}`,
    `default_client_limit = ${processes * 2}`,
    `service imap {\n  process_limit = ${Math.max(1024, processes)}\n}`,
  ].join('\n');
}

function idsOf(user: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${user}:`));
  if (!line) throw new Error(`no system user ${user}: is dovecot-core installed?`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}
