import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

  async stop(): Promise<void> {
    await this.cluster?.close();
    this.cluster = undefined;
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
