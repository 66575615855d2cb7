import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Response } from 'express';
import { createHash } from 'node:crypto';
import { Caller } from '../auth/caller';
import { AlcartaError } from '../common/errors';
import { AppConfig } from '../config/app-config';
import { WaitEngine } from '../waits/wait-engine';
import { RequestFeedWaiter } from '../waits/waiters';
import { ConsoleRequestsService } from './console-requests.service';
import { ConsoleViews } from './console-views';

/**
 * How long one stream lasts before the browser reconnects (after RECONNECT_MS). Each reconnect
 * passes the session guard again, so a session that was signed out or expired stops streaming
 * within this time even when no doorbell ends it.
 */
export const STREAM_LIFETIME_MS = 10 * 60 * 1000;
/** The `retry:` the browser waits before it reconnects a stream that ended (a drain, the lifetime). */
export const RECONNECT_MS = 2000;

/** The pending list as a page shows it: its HTML, and a fingerprint that says whether it changed. */
export interface PendingSnapshot {
  html: string;
  fingerprint: string;
}

/**
 * The live pending list of SPEC 11, over Server-Sent Events. Each open stream parks one
 * RequestFeedWaiter in the wait engine, so it is woken by the same `request` doorbells as the
 * agents' waits (no polling, no listener of its own), ends when its token loses its access or the
 * replica drains, and is re-read at the engine's safety re-check. A stream keeps in memory only the
 * fingerprint of what it last sent and whether a re-read is running; it sends the re-rendered list
 * only when the fingerprint changed.
 */
@Injectable()
export class ConsolePendingFeedService implements OnModuleDestroy {
  /** Open streams; one timer writes the keepalive comment to all of them. */
  private readonly open = new Set<Response>();
  private keepalive: NodeJS.Timeout | undefined;

  constructor(
    private readonly requests: ConsoleRequestsService,
    private readonly views: ConsoleViews,
    private readonly engine: WaitEngine,
    private readonly config: AppConfig,
  ) {}

  /** Streams open on this replica now (the `alcarta_console_live_streams` gauge). */
  get openStreams(): number {
    return this.open.size;
  }

  onModuleDestroy(): void {
    clearInterval(this.keepalive);
  }

  /** The pending list of `caller` (in one mailbox, or all it reaches), rendered as the page shows it. */
  async snapshot(caller: Caller, mailboxId: string | undefined) {
    const listing = await this.requests.pending(caller, mailboxId);
    const html = this.views.fragment('_pending-list', { mailboxId, ...listing });
    return { ...listing, html, fingerprint: fingerprintOf(html) };
  }

  /**
   * Streams the pending list to `res` until the client goes away, the stream's lifetime passes, the
   * replica drains or the token loses its access (then an `ended` event tells the page so). `seen`
   * is the fingerprint of the list the page shows; the first event comes only if it is stale.
   */
  async stream(caller: Caller, mailboxId: string | undefined, seen: string | undefined, res: Response) {
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
    this.opened(res);

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
      await this.engine.follow(feed, STREAM_LIFETIME_MS, closed.signal);
    } catch (err) {
      if (!(err instanceof AlcartaError && err.code === 'unauthorized')) throw err;
      if (!res.writableEnded && !res.destroyed)
        res.write(`event: ended\ndata: ${JSON.stringify({ reason: err.reason })}\n\n`);
    } finally {
      this.closed(res);
      res.end();
    }
  }

  private opened(res: Response): void {
    this.open.add(res);
    this.keepalive ??= setInterval(() => {
      for (const stream of this.open) if (!stream.destroyed) stream.write(': keepalive\n\n');
    }, this.config.keepaliveMs);
  }

  private closed(res: Response): void {
    this.open.delete(res);
    if (this.open.size > 0) return;
    clearInterval(this.keepalive);
    this.keepalive = undefined;
  }
}

function pendingEvent(snapshot: PendingSnapshot): string {
  // The id comes back as Last-Event-ID when the browser reconnects: the stream then knows what it shows.
  return `event: pending\nid: ${snapshot.fingerprint}\ndata: ${JSON.stringify({ fingerprint: snapshot.fingerprint, html: snapshot.html })}\n\n`;
}

/** A short digest of the list's HTML: equal lists give equal fingerprints, on every replica. */
export function fingerprintOf(html: string): string {
  return createHash('sha256').update(html).digest('base64url').slice(0, 22);
}
