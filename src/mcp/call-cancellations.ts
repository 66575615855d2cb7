import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import { DataSource } from 'typeorm';
import { Doorbell, requestKey } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { EventLog } from '../events/event-log';

/**
 * `notifications/cancelled` for a stateless endpoint. The cancellation is a POST of its own and may
 * reach any replica, while the request it cancels is parked on one of them. So the replica that
 * receives it rings the `call_cancelled` doorbell (token id + request id), and every replica —
 * this one included, through its LISTEN connection — ends the matching in-flight request it holds.
 *
 * Requests are keyed by the token that made them and their JSON-RPC id: only the same token can
 * cancel its requests. Two clients that share a token and happen to use the same request id at
 * the same time are not told apart (there is no session to do it); a cancellation ends both.
 */
@Injectable()
export class CallCancellations implements DoorbellSubscriber {
  private readonly logger = new Logger(CallCancellations.name);
  private readonly inFlight = new Map<string, Set<() => void>>();

  constructor(
    listener: DoorbellListener,
    private readonly eventLog: EventLog,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {
    listener.subscribe(this);
  }

  /** In-flight requests that a cancellation could end (for tests and diagnostics). */
  get size(): number {
    let n = 0;
    for (const set of this.inFlight.values()) n += set.size;
    return n;
  }

  /**
   * Files an in-flight request; `cancel` ends it (at most once). Returns the function that removes
   * it again, which the caller runs when the request ends in any way.
   */
  track(tokenId: string, id: RequestId, cancel: () => void): () => void {
    const key = keyOf(tokenId, id);
    if (key === undefined) return () => undefined;
    let set = this.inFlight.get(key);
    if (!set) this.inFlight.set(key, (set = new Set()));
    const entry = () => {
      untrack();
      cancel();
    };
    const untrack = () => {
      set.delete(entry);
      if (set.size === 0 && this.inFlight.get(key) === set) this.inFlight.delete(key);
    };
    set.add(entry);
    return untrack;
  }

  /**
   * The token cancelled request `id`: tells every replica. A cancellation that cannot be rung (the
   * database is unreachable) is dropped, as MCP allows: the request then ends at its own timeout.
   */
  async announce(tokenId: string, id: RequestId): Promise<void> {
    const key = requestKey(id);
    if (key === undefined) return;
    try {
      await this.eventLog.ringDoorbell(this.dataSource.manager, { kind: 'call_cancelled', tokenId, requestKey: key });
    } catch (err) {
      this.logger.warn({ msg: 'could not announce a cancelled request', error: (err as Error).message });
    }
  }

  onDoorbell(bell: Doorbell): void {
    if (bell.kind !== 'call_cancelled') return;
    const set = this.inFlight.get(`${bell.tokenId} ${bell.requestKey}`);
    if (set) for (const cancel of [...set]) cancel();
  }
}

function keyOf(tokenId: string, id: RequestId): string | undefined {
  const key = requestKey(id);
  return key === undefined ? undefined : `${tokenId} ${key}`;
}
