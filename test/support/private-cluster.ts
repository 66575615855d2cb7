import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { freePort } from '#app/common/net.js';
import { LocalDatabase, openEmbeddedPostgres } from '#app/database/embedded-postgres.js';

/**
 * A PostgreSQL cluster of one test's own, which the test can stop and start again on the same port
 * and data directory (a database outage, with the server under test left running).
 */
export class PrivateCluster {
  private cluster: LocalDatabase | undefined;

  private constructor(
    private readonly dir: string,
    private readonly port: number,
  ) {}

  static async create(): Promise<PrivateCluster> {
    const dir = await mkdtemp(join(tmpdir(), 'alcarta-outage-'));
    await chmod(dir, 0o755); // the postgres OS user must reach it when we run as root
    const cluster = new PrivateCluster(dir, await freePort());
    await cluster.start();
    return cluster;
  }

  /** Starts (again); resolves with the DATABASE_URL, the same every time. */
  async start(): Promise<string> {
    this.cluster = await openEmbeddedPostgres(join(this.dir, 'cluster'), { persistent: true, port: this.port });
    return this.cluster.url;
  }

  /** A fast shutdown (`pg_ctl stop -m fast`): sessions are terminated with 57P01, open transactions roll back. */
  async stop(): Promise<void> {
    await this.cluster?.close();
    this.cluster = undefined;
  }

  /**
   * An immediate shutdown (`pg_ctl stop -m immediate`, SIGQUIT to the postmaster): every session is
   * cut without a checkpoint, and the next start recovers from the WAL, as after a crash.
   */
  async stopImmediately(): Promise<void> {
    const pid = Number((await readFile(join(this.dir, 'cluster', 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    process.kill(pid, 'SIGQUIT');
    // close() waits for the postmaster to exit (its SIGINT reaches a process that is already going).
    await this.stop();
  }

  /** Terminates every session of the server under test (`pg_terminate_backend`), PostgreSQL staying up. */
  async terminateSessions(applicationName: string): Promise<number> {
    const client = new Client({ connectionString: this.url });
    await client.connect();
    try {
      const result = await client.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
        [applicationName],
      );
      return result.rowCount ?? 0;
    } finally {
      await client.end();
    }
  }

  get url(): string {
    if (!this.cluster) throw new Error('the cluster is stopped');
    return this.cluster.url;
  }

  /** Stops it and removes its files. */
  async remove(): Promise<void> {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}
