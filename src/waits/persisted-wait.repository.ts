import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In, LessThan } from 'typeorm';
import { Credential } from '../kernel/caller';
import { AccessEndReason, LAPSE_REASON_SQL, TOKEN_LAPSED_SQL } from '../auth/credential-revocation';
import { resolvedWaitBells } from '../events/doorbell';
import { ListenerSession } from '../events/doorbell-listener';
import { EventLog } from '../events/event-log';
import { PersistedWaitEntity, WaitOutcome } from './persisted-wait.entity';
import { AccessEnded, WaitResult } from './wait-spec';

export type TicketRefusal = 'ticket_invalid' | 'ticket_consumed' | 'ticket_expired';

/** A websocket ticket that was just used: the wait, and the credential the socket acts for. */
export interface ConsumedTicket {
  wait: PersistedWaitEntity;
  credential: Credential;
}

/** On a `waits` row `w`: not ended because its credential lost its access (see AccessEnded). */
const NOT_ENDED_BY_ACCESS_SQL = `(w.result IS NULL OR NOT w.result ? 'error')`;

/** A persisted wait and the result just fixed for it. */
export interface WaitResolution {
  waitId: string;
  result: WaitResult;
}

/**
 * Runs once per batch in the transaction that fixes the results of some waits, with those that
 * were still pending (so it sees each resolution once), for whoever keeps something that depends
 * on them (tasks complete with them). Registered by that module, so waits never write its tables.
 */
export type WaitResolutionHook = (manager: EntityManager, resolved: readonly WaitResolution[]) => Promise<void>;

/** What one lease tick found: whether the lease had to be taken anew, and the waits it claimed. */
export interface LeaseTick {
  /** The lease row was gone (another replica found it lapsed and released its waits). */
  renewedAfterLoss: boolean;
  /** Owners whose lapsed leases this tick ended (their waits became unowned). */
  lapsedOwners: string[];
  /** Whether other replicas hold live leases (then a hung one of them must be found quickly). */
  peers: boolean;
  claimed: PersistedWaitEntity[];
}

/** The result recorded for a wait stopped before its outcome; nobody is ever shown it. */
const STOPPED: WaitResult = { matched: false, timed_out: false, shutdown: false, events: [] };

@Injectable()
export class PersistedWaitRepository {
  private readonly resolutionHooks: WaitResolutionHook[] = [];

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly eventLog: EventLog,
  ) {}

  /**
   * The lease this process's waits are owned under (see WaitEngine), or undefined while it holds
   * none (not started, draining, the CLI): new waits are then stored unowned.
   */
  leaseOwner: string | undefined;

  /**
   * Stores a new wait, owned by this process when it holds a live lease (its own doorbell tells it
   * to watch), else unowned (the doorbell tells every replica to claim it). `alongside` writes rows
   * that belong with it (a task) in the same transaction.
   */
  async insert(
    wait: Omit<PersistedWaitEntity, 'createdAt'>,
    alongside?: (manager: EntityManager) => Promise<void>,
  ): Promise<PersistedWaitEntity> {
    return this.dataSource.transaction(async (manager) => {
      await manager.insert(PersistedWaitEntity, { ...wait, owner: null });
      await alongside?.(manager);
      const owner = this.leaseOwner && (await this.own(manager, wait.id, this.leaseOwner));
      await this.eventLog.ringDoorbell(manager, { kind: 'wait_created', waitId: wait.id, owner });
      return manager.findOneByOrFail(PersistedWaitEntity, { id: wait.id });
    });
  }

  /**
   * Makes `owner` the owner of a wait if its lease is live. The lease row is locked (KEY SHARE) for
   * the rest of the transaction, so a replica that finds the lease lapsed and deletes it waits for
   * this commit and then sees the wait's owner to release it: no wait is left with a gone owner.
   */
  private async own(manager: EntityManager, waitId: string, owner: string): Promise<string | undefined> {
    const [rows] = await manager.query<[Array<{ owner: string }>, number]>(
      `UPDATE waits w SET owner = o.id
         FROM (SELECT id FROM wait_owners WHERE id = $2 AND lease_expires_at > now() FOR KEY SHARE) o
        WHERE w.id = $1
        RETURNING w.owner`,
      [waitId, owner],
    );
    return rows[0]?.owner;
  }

  /**
   * One lease tick of `owner`, in one transaction: looks whether other replicas hold live leases,
   * renews (or takes anew) its lease until `leaseMs(peers)` from now with the session of its
   * doorbell listener, ends the leases that lapsed or
   * whose listener session is gone from `pg_stat_activity` (a process that died: its connections
   * closed), so their waits become unowned, and claims up to `limit` unowned pending waits (oldest
   * first, skipping rows another replica is claiming). The cost does not grow with the waits owned:
   * renewal writes one row.
   */
  async leaseTick(
    owner: string,
    listener: ListenerSession | undefined,
    leaseMs: (peers: boolean) => number,
    limit: number,
  ): Promise<LeaseTick> {
    return this.dataSource.transaction(async (manager) => {
      const [{ peers }] = await manager.query<Array<{ peers: boolean }>>(
        `SELECT EXISTS (SELECT 1 FROM wait_owners WHERE id <> $1 AND lease_expires_at > now()) AS peers`,
        [owner],
      );
      const [lease] = await manager.query<Array<{ inserted: boolean }>>(
        `INSERT INTO wait_owners (id, lease_expires_at, listener_pid, listener_started_at)
         VALUES ($1, now() + $2 * interval '1 millisecond', $3, $4::timestamptz)
         ON CONFLICT (id) DO UPDATE
           SET lease_expires_at = EXCLUDED.lease_expires_at, listener_pid = EXCLUDED.listener_pid,
               listener_started_at = EXCLUDED.listener_started_at
         RETURNING xmax = 0 AS inserted`,
        [owner, leaseMs(peers), listener?.pid ?? null, listener?.startedAt ?? null],
      );
      // A separate statement from the release below: it starts after every transaction that held
      // a deleted lease (KEY SHARE, see own()) committed, so it sees all the waits they took. A
      // lease without a listener session (its listener was reconnecting) lives on its time alone.
      const [gone] = await manager.query<[Array<{ id: string }>, number]>(
        `DELETE FROM wait_owners o
          WHERE o.id <> $1
            AND (o.lease_expires_at < now()
                 OR (o.listener_pid IS NOT NULL AND NOT EXISTS (
                       SELECT 1 FROM pg_stat_activity a
                        WHERE a.pid = o.listener_pid AND a.backend_start = o.listener_started_at)))
          RETURNING o.id`,
        [owner],
      );
      const lapsedOwners = gone.map((row) => row.id);
      if (lapsedOwners.length > 0) {
        await manager.query(`UPDATE waits SET owner = NULL WHERE owner = ANY($1::text[])`, [lapsedOwners]);
      }
      return {
        renewedAfterLoss: lease.inserted,
        lapsedOwners,
        peers,
        claimed: await this.claimIn(manager, owner, limit),
      };
    });
  }

  /** Claims up to `limit` unowned pending waits for `owner` (whose lease must be live). */
  async claim(owner: string, limit: number): Promise<PersistedWaitEntity[]> {
    return this.dataSource.transaction((manager) => this.claimIn(manager, owner, limit));
  }

  private async claimIn(manager: EntityManager, owner: string, limit: number): Promise<PersistedWaitEntity[]> {
    const [rows] = await manager.query<[Array<{ id: string }>, number]>(
      `UPDATE waits w SET owner = o.id
         FROM (SELECT id FROM wait_owners WHERE id = $1 AND lease_expires_at > now() FOR KEY SHARE) o,
              (SELECT id FROM waits WHERE status = 'pending' AND owner IS NULL
                ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) c
        WHERE w.id = c.id
        RETURNING w.id`,
      [owner, limit],
    );
    if (rows.length === 0) return [];
    return manager.findBy(PersistedWaitEntity, { id: In(rows.map((r) => r.id)) });
  }

  /**
   * Gives up `owner`'s lease and sets its waits unowned, in one transaction, and rings so that
   * another replica claims them at once.
   */
  async release(owner: string): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await manager.query(`DELETE FROM wait_owners WHERE id = $1`, [owner]);
      const [rows] = await manager.query<[unknown[], number]>(
        `UPDATE waits SET owner = NULL WHERE owner = $1 RETURNING id`,
        [owner],
      );
      if (rows.length > 0) await this.eventLog.ringDoorbell(manager, { kind: 'waits_released', owner });
    });
  }

  /** The pending waits `owner` owns (the safety re-check reconciles its watchers with them). */
  async ownedIds(owner: string): Promise<string[]> {
    const rows = await this.dataSource.query<Array<{ id: string }>>(
      `SELECT id FROM waits WHERE owner = $1 AND status = 'pending'`,
      [owner],
    );
    return rows.map((r) => r.id);
  }

  onResolved(hook: WaitResolutionHook): void {
    this.resolutionHooks.push(hook);
  }

  /**
   * Fixes the results of pending waits in one transaction: one UPDATE for all of them (the batch
   * goes as one JSON document, which costs less to build and to parse than an array of them), the
   * resolution hooks once with those that were still pending (a wait another replica resolved
   * first keeps its result), and the doorbells that wake whoever waits for these results on every
   * replica, several ids per bell, in one statement. Only waits that are still pending and still
   * owned by `owner` are written: an owner that hung past its lease and resumes may still hold
   * watches of waits another replica took over; what it writes for them is dropped, so a result,
   * once another replica has delivered it, never changes. Returns the ids resolved here.
   */
  async resolveMany(owner: string, resolutions: readonly WaitResolution[]): Promise<string[]> {
    if (resolutions.length === 0) return [];
    return this.dataSource.transaction(async (manager) => {
      const [rows] = await manager.query<[Array<{ id: string }>, number]>(
        `UPDATE waits w SET status = 'resolved', result = r.result, resolved_at = now(), owner = NULL
           FROM jsonb_to_recordset($1::jsonb) AS r(id text, result jsonb)
          WHERE w.id = r.id AND w.status = 'pending' AND w.owner = $2
          RETURNING w.id`,
        [JSON.stringify(resolutions.map((r) => ({ id: r.waitId, result: r.result }))), owner],
      );
      if (rows.length === 0) return [];
      const resolvedIds = rows.map((r) => r.id);
      const ids = new Set(resolvedIds);
      const resolved = resolutions.length === ids.size ? resolutions : resolutions.filter((r) => ids.has(r.waitId));
      for (const hook of this.resolutionHooks) await hook(manager, resolved);
      await this.eventLog.ringDoorbells(manager, resolvedWaitBells(resolvedIds));
      return resolvedIds;
    });
  }

  /**
   * Ends the token's pending waits without a result (it lost its access). No doorbell per wait:
   * the `credential_revoked` doorbell of the same transaction ends everything of the token.
   */
  async endForToken(manager: EntityManager, tokenId: string, reason: AccessEndReason): Promise<void> {
    const ended: AccessEnded = { error: 'unauthorized', reason };
    await manager.query(
      `UPDATE waits SET status = 'resolved', result = $2, resolved_at = now(), owner = NULL
        WHERE token_id = $1 AND status = 'pending'`,
      [tokenId, JSON.stringify(ended)],
    );
  }

  /** Ends, in one statement, the pending waits of every revoked or expired token; returns those tokens. */
  async endForLapsedTokens(manager: EntityManager): Promise<string[]> {
    const [rows] = await manager.query<[Array<{ token_id: string }>, number]>(
      `UPDATE waits w
          SET status = 'resolved', resolved_at = now(), owner = NULL,
              result = jsonb_build_object('error', 'unauthorized', 'reason', ${LAPSE_REASON_SQL})
         FROM tokens t
        WHERE t.id = w.token_id AND w.status = 'pending' AND ${TOKEN_LAPSED_SQL}
        RETURNING w.token_id`,
    );
    return [...new Set(rows.map((r) => r.token_id))];
  }

  /** Ends a pending wait nobody needs any more (its task was cancelled): every replica stops watching. */
  async stop(manager: EntityManager, id: string): Promise<void> {
    await manager.query(
      `UPDATE waits SET status = 'resolved', result = $2, resolved_at = now(), owner = NULL
        WHERE id = $1 AND status = 'pending'`,
      [id, JSON.stringify(STOPPED)],
    );
    await this.eventLog.ringDoorbell(manager, { kind: 'wait_resolved', waitId: id });
  }

  /** Deletes waits (their tasks expired); replicas watching them let go. */
  async remove(manager: EntityManager, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await manager.delete(PersistedWaitEntity, { id: In([...ids]) });
    for (const bell of resolvedWaitBells(ids)) await this.eventLog.ringDoorbell(manager, bell);
  }

  find(id: string): Promise<PersistedWaitEntity | null> {
    return this.dataSource.getRepository(PersistedWaitEntity).findOneBy({ id });
  }

  findForToken(id: string, tokenId: string): Promise<PersistedWaitEntity | null> {
    return this.dataSource.getRepository(PersistedWaitEntity).findOneBy({ id, tokenId });
  }

  /** The status and result of the listed waits that exist (one query for many doorbells' worth of ids). */
  async outcomes(ids: readonly string[]): Promise<Map<string, WaitOutcome>> {
    if (ids.length === 0) return new Map();
    const rows = await this.dataSource.query<Array<WaitOutcome & { id: string }>>(
      `SELECT id, status, result FROM waits WHERE id = ANY($1::text[])`,
      [ids],
    );
    return new Map(rows.map(({ id, status, result }) => [id, { status, result }]));
  }

  /** The listed waits that are pending and owned by `owner`. */
  owned(owner: string, ids: readonly string[]): Promise<PersistedWaitEntity[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.dataSource.getRepository(PersistedWaitEntity).findBy({ id: In([...ids]), owner, status: 'pending' });
  }

  /**
   * Consumes a websocket ticket: one conditional UPDATE, so exactly one of any number of racing
   * connections (on any replica) wins; PostgreSQL's row lock decides. The ticket is invalid, and
   * stays unused, when its credential lost its access: a revoked or expired token (read from the
   * `credentials` view of the auth module), or a wait already ended for that reason (a principal
   * that lost a mailbox). The wait comes with the credential the socket acts for.
   */
  async consumeTicket(ticketHash: string): Promise<ConsumedTicket | TicketRefusal> {
    const authenticatedAt = Date.now();
    const [rows] = await this.dataSource.query<[Array<{ id: string; expires_at: Date | null }>, number]>(
      `UPDATE waits w SET ticket_consumed_at = now()
         FROM credentials t
        WHERE w.ticket_hash = $1 AND w.ticket_consumed_at IS NULL AND w.connect_deadline > now()
          AND ${NOT_ENDED_BY_ACCESS_SQL} AND t.id = w.token_id AND NOT ${TOKEN_LAPSED_SQL}
        RETURNING w.id, t.expires_at`,
      [ticketHash],
    );
    const repository = this.dataSource.getRepository(PersistedWaitEntity);
    if (rows.length === 1) {
      const wait = await repository.findOneByOrFail({ id: rows[0].id });
      return { wait, credential: { tokenId: wait.tokenId, expiresAt: rows[0].expires_at, authenticatedAt } };
    }
    const [wait] = await this.dataSource.query<Array<{ consumed: boolean; usable: boolean }>>(
      `SELECT w.ticket_consumed_at IS NOT NULL AS consumed,
              ${NOT_ENDED_BY_ACCESS_SQL} AND EXISTS (SELECT 1 FROM credentials t WHERE t.id = w.token_id AND NOT ${TOKEN_LAPSED_SQL}) AS usable
         FROM waits w WHERE w.ticket_hash = $1`,
      [ticketHash],
    );
    if (!wait?.usable) return 'ticket_invalid';
    return wait.consumed ? 'ticket_consumed' : 'ticket_expired';
  }

  /**
   * Deletes results older than the retention period; returns how many. A task keeps its own copy
   * of the result, so the waits behind tasks go too.
   */
  async purgeResolvedBefore(cutoff: Date): Promise<number> {
    const result = await this.dataSource
      .getRepository(PersistedWaitEntity)
      .delete({ status: 'resolved', resolvedAt: LessThan(cutoff) });
    return result.affected ?? 0;
  }
}
