import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { TestDatabase } from './database';
import { connectMcp } from './mcp';
import { RestClient } from './rest';
import { scrubbed, spawnServer, SpawnedServer } from './spawned-server';
import { createToken } from './test-server';

/**
 * One server process of a multi-replica test, with an admin REST client (a person: it decides) and
 * an MCP client (the agent: it asks). They are different credentials, since the credential that asks
 * for a request may never decide it.
 */
export interface Replica {
  name: string;
  server: SpawnedServer;
  admin: RestClient;
  client: Client;
}

/**
 * Server processes sharing one database: start them by name, stop them by signal (a SIGTERM must
 * end in exit status 0), and stop whatever is left at the end of the test file.
 */
export class ReplicaSet {
  readonly running: Replica[] = [];
  /** The secret of the agent token every replica's MCP client uses unless told otherwise. */
  private agentSecret: string | undefined;

  constructor(
    private readonly databaseUrl: string,
    private readonly adminSecret: string,
    private readonly env: Record<string, string> = {},
  ) {}

  /**
   * Starts one more process; its MCP client uses `clientSecret`, by default the set's agent token
   * (every scope an agent has, on every mailbox; made through the first replica started).
   */
  async start(name: string, clientSecret?: string): Promise<Replica> {
    const server = await spawnServer({
      DATABASE_URL: this.databaseUrl,
      ALCARTA_BOOTSTRAP_TOKEN: this.adminSecret,
      ...this.env,
    });
    const admin = new RestClient(server.url, this.adminSecret);
    this.agentSecret ??= (
      await createToken(admin, {
        name: 'replica agent',
        scopes: ['mail:read', 'mail:send', 'approvals:read', 'mail:ingest'],
        mailboxes: ['*'],
      })
    ).secret;
    const replica = {
      name,
      server,
      admin,
      client: await connectMcp(server.url, clientSecret ?? this.agentSecret),
    };
    this.running.push(replica);
    return replica;
  }

  /** Stops a replica by `signal`; a SIGTERM must end in exit status 0. */
  async stop(replica: Replica, signal: NodeJS.Signals): Promise<void> {
    this.running.splice(this.running.indexOf(replica), 1);
    await replica.client.close();
    const code = await replica.server.stop(signal);
    if (signal === 'SIGTERM') {
      assert.equal(code, 0, `${replica.name} exit status; stderr:\n${scrubbed(replica.server.stderr())}`);
    }
  }

  /** For `after`: stops every replica still running. */
  async stopAll(): Promise<void> {
    for (const replica of [...this.running]) {
      this.running.splice(this.running.indexOf(replica), 1);
      await replica.client.close();
      await replica.server.stop('SIGTERM');
    }
  }
}

/** The process id of the replica whose lease a persisted wait is owned under (owner ids carry it), or null. */
export async function waitOwnerPid(db: TestDatabase, waitId: string): Promise<string | null> {
  const [{ owner }] = await db.query<{ owner: string | null }>('SELECT owner FROM waits WHERE id = $1', [waitId]);
  return owner === null ? null : owner.split(':')[1];
}
