import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Response } from 'express';
import { createHash } from 'node:crypto';
import { Caller } from '../kernel/caller';
import { AlcartaError } from '../kernel/errors';
import { AppConfig } from '../config/app-config';
import { Doorbell } from '../events/doorbell';
import { DoorbellListener, DoorbellSubscriber } from '../events/doorbell-listener';
import { WaitEngine } from '../waits/wait-engine';
import { RequestFeedWaiter } from '../waits/waiters';
import { ConsoleRequestsService } from './console-requests.service';
import { ActiveSession, ConsoleSessionService } from './console-session.service';
import { ConsoleViews } from './console-views';

/** How many times a snapshot re-reads while the pending count moves under it. */
const SNAPSHOT_READS = 3;
/**
 * How long one stream lasts before the browser reconnects (after RECONNECT_MS). Each reconnect
 * passes the session guard again, so a session that expired stops streaming within this time; a
 * signed-out session's streams end at its `session_ended` doorbell.
 */
export const STREAM_LIFETIME_MS = 10 * 60 * 1000;
/** The `retry:` the browser waits before it reconnects a stream that ended (a drain, the lifetime). */
export const RECONNECT_MS = 2000;

/**
 * The pending list as a page shows it: its HTML, the header's pending count (every mailbox the
 * caller reaches, whatever the list's filter), and a fingerprint that says whether either changed.
 */
export interface PendingSnapshot {
  html: string;
  pendingCount: number;
  fingerprint: string;
}

/** An open stream, as a sign-out finds it. */
interface OpenStream {
  readonly sessionId: string;
  /** Aborted when the session is signed out: the stream then says so and ends. */
  readonly signedOut: AbortController;
}

/**
 * The live pending list of the console (docs/approvers.md), over Server-Sent Events. Each open stream parks one
 * RequestFeedWaiter in the wait engine, so it is woken by the same `request` doorbells as the
 * agents' waits (no polling, no connection of its own), ends when its token loses its access or the
 * replica drains, and is re-read at the engine's safety re-check. A sign-out ends the session's
 * streams on every replica through the `session_ended` doorbell of the same listener. A stream
 * keeps in memory only the fingerprint of what it last sent and whether a re-read is running; it
 * sends the re-rendered list only when the fingerprint changed.
 */
@Injectable()
export class ConsolePendingFeedService implements DoorbellSubscriber, OnModuleDestroy {
  /** Open streams; one timer writes the keepalive comment to all of them. */
  private readonly open = new Map<Response, OpenStream>();
  private keepalive: NodeJS.Timeout | undefined;

  constructor(
    private readonly requests: ConsoleRequestsService,
    private readonly sessions: ConsoleSessionService,
    private readonly views: ConsoleViews,
    private readonly engine: WaitEngine,
    private readonly config: AppConfig,
    listener: DoorbellListener,
  ) {
    listener.subscribe(this);
  }

  onDoorbell(bell: Doorbell): void {
    if (bell.kind === 'session_ended') this.endSession(bell.sessionId);
  }

  /** Sign-outs rung while the listener was away are lost: end the streams of sessions that are gone. */
  onListenerReconnected(): void {
    void this.endVanishedSessions([...new Set([...this.open.values()].map((s) => s.sessionId))]);
  }

  /** Streams open on this replica now (the `alcarta_console_live_streams` gauge). */
  get openStreams(): number {
    return this.open.size;
  }

  onModuleDestroy(): void {
    clearInterval(this.keepalive);
  }

  /**
   * The pending list of `caller` (in one mailbox, or all it reaches), rendered as the page shows it.
   * The list and the count are two reads: a request decided between them would show in the list
   * beside a count without it. The count is read before and after the list, and the pair read
   * again while they differ (a few times at most), so a snapshot is one state of the database.
   */
  async snapshot(caller: Caller, mailboxId: string | undefined) {
    let pendingCount = await this.requests.pendingCount(caller);
    let listing = await this.requests.pending(caller, mailboxId);
    for (let attempt = 0; attempt < SNAPSHOT_READS; attempt++) {
      const after = await this.requests.pendingCount(caller);
      if (after === pendingCount) break;
      pendingCount = after;
      listing = await this.requests.pending(caller, mailboxId);
    }
    const html = this.views.fragment('_pending-list', { mailboxId, ...listing });
    return { ...listing, html, pendingCount, fingerprint: fingerprintOf(`${pendingCount}\n${html}`) };
  }

  /**
   * Streams the pending list to `res` until the client goes away, the stream's lifetime passes, the
   * replica drains, the token loses its access or the session is signed out (then an `ended` event
   * tells the page why). `seen` is the fingerprint of the list the page shows; the first event comes
   * only if it is stale.
   */
  async stream(session: ActiveSession, mailboxId: string | undefined, seen: string | undefined, res: Response) {
    const caller = session.caller;
    // Read before the stream opens: a mailbox the caller cannot see is an error page, not a stream.
    const first = await this.snapshot(caller, mailboxId);
    // Gone during the read: its `close` event has passed, so nothing would end the stream.
    if (res.destroyed || !res.socket || res.socket.destroyed) return;
    let last = first.fingerprint;
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'X-Accel-Buffering': 'no' });
    res.write(`retry: ${RECONNECT_MS}\n\n`);
    // The list changed between the page's render (or the last stream) and now.
    if (first.fingerprint !== seen) res.write(pendingEvent(first));
    const closed = new AbortController();
    res.on('close', () => closed.abort());
    const signedOut = new AbortController();
    this.opened(res, { sessionId: session.id, signedOut });
    // Filed first, then checked: a sign-out that rang before the stream was filed is seen here.
    await this.endVanishedSessions([session.id]);

    // Single flight: a ring during a re-read marks it to run once more.
    let reading: 'idle' | 'running' | 'again' = 'idle';
    const reread = async () => {
      if (reading !== 'idle') return void (reading = 'again');
      reading = 'running';
      try {
        do {
          reading = 'running';
          const now = await this.snapshot(caller, mailboxId);
          if (now.fingerprint !== last && !res.writableEnded && !res.destroyed) {
            last = now.fingerprint;
            res.write(pendingEvent(now));
          }
        } while ((reading as string) === 'again');
      } catch {
        // The database failed: the next doorbell or safety re-check reads again.
      } finally {
        reading = 'idle';
      }
    };
    const feed = new RequestFeedWaiter(caller, mailboxId, () => void reread());
    try {
      // Checked and followed in one synchronous step: no doorbell, no `close` can come in between.
      const ends = AbortSignal.any([closed.signal, signedOut.signal]);
      // A session that runs out ends its streams then, not at their next reconnect.
      const untilExpiry = session.expiresAt.getTime() - Date.now();
      if (!ends.aborted) await this.engine.follow(feed, Math.max(0, Math.min(STREAM_LIFETIME_MS, untilExpiry)), ends);
      if (signedOut.signal.aborted) ended(res, 'signed_out');
      else if (!closed.signal.aborted && session.expiresAt.getTime() <= Date.now()) ended(res, 'session_expired');
    } catch (err) {
      if (!(err instanceof AlcartaError && err.code === 'unauthorized')) throw err;
      ended(res, err.reason);
    } finally {
      this.closed(res);
      res.end();
    }
  }

  /** Ends the streams of a signed-out session on this replica (rare: a look at every stream). */
  private endSession(sessionId: string): void {
    for (const stream of this.open.values()) if (stream.sessionId === sessionId) stream.signedOut.abort();
  }

  /** Ends the streams of those of these sessions that no longer exist. */
  private async endVanishedSessions(sessionIds: string[]): Promise<void> {
    if (sessionIds.length === 0) return;
    try {
      const existing = await this.sessions.existing(sessionIds);
      for (const id of sessionIds) if (!existing.has(id)) this.endSession(id);
    } catch {
      // The database failed: the stream ends at its lifetime, and the reconnect passes the guard again.
    }
  }

  private opened(res: Response, stream: OpenStream): void {
    this.open.set(res, stream);
    this.keepalive ??= setInterval(() => {
      for (const stream of this.open.keys()) if (!stream.destroyed) stream.write(': keepalive\n\n');
    }, this.config.keepaliveMs);
  }

  private closed(res: Response): void {
    this.open.delete(res);
    if (this.open.size > 0) return;
    clearInterval(this.keepalive);
    this.keepalive = undefined;
  }
}

/** Tells the page that nothing more will come, and why (`signed_out`, or why the token lost its access). */
function ended(res: Response, reason: string): void {
  if (!res.writableEnded && !res.destroyed) res.write(`event: ended\ndata: ${JSON.stringify({ reason })}\n\n`);
}

function pendingEvent(snapshot: PendingSnapshot): string {
  // The id comes back as Last-Event-ID when the browser reconnects: the stream then knows what it shows.
  return `event: pending\nid: ${snapshot.fingerprint}\ndata: ${JSON.stringify({ fingerprint: snapshot.fingerprint, html: snapshot.html, pending_count: snapshot.pendingCount })}\n\n`;
}

/** A short digest of what a page shows: equal lists give equal fingerprints, on every replica. */
export function fingerprintOf(html: string): string {
  return createHash('sha256').update(html).digest('base64url').slice(0, 22);
}
