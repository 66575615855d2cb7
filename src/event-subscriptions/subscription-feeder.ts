import { randomBytes } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { CredentialRepository } from '../auth/credential.repository';
import { clientFacingError } from '../database/database-errors';
import { DoorbellListener } from '../events/doorbell-listener';
import { EventLog } from '../events/event-log';
import { BackgroundJob, Job } from '../lifecycle/background-job';
import { DrainState } from '../lifecycle/drain-state';
import { ClaimResult, DueWork, DueWorkLoop } from '../outbox/due-work-loop';
import { EventFeedService, FeedPage } from '../waits/event-feed.service';
import { eventType } from '../waits/event-feed-types';
import { WebhookDeliveryRepository } from '../webhooks/webhook-delivery.repository';
import { WebhookEndpointRepository } from '../webhooks/webhook-endpoint.repository';
import { EventSubscriptionEntity } from './event-subscription.entity';
import { EventSubscriptionRepository } from './event-subscription.repository';

/** Occurrences read from one feed at a time. */
const FEED_PAGE = 100;
/** While a feed is not settled (see FeedPage), it is read again this soon. */
const UNSETTLED_RECHECK_MS = 250;
/** A `terminated` envelope gets this long to be delivered before its subscription's endpoint goes. */
const TERMINATED_DELIVERY_MS = 24 * 3600_000;

/**
 * Reads the feeds of the Events extension's webhook subscriptions and queues what they find for the
 * webhook engine (every replica runs one, on the outbox's DueWorkLoop). New mail and request events
 * ring its doorbells; each pass reads every live subscription's feed after its position (the pages
 * `events/poll` returns, for the subscription's own caller as it is now; a revoked credential rings
 * too, to end its subscriptions at once), and in one transaction
 * queues the page's occurrences and moves the position, so nothing is skipped or queued twice. One
 * replica reads a subscription at a time (SKIP LOCKED). A subscription whose caller has lost access
 * ends: it is sent a `terminated` envelope.
 */
@Job('work')
@Injectable()
export class SubscriptionFeeder implements DueWork, BackgroundJob {
  readonly what = 'events subscription feeder';
  readonly doorbell = ['message', 'request', 'credential_revoked'] as const;
  private readonly logger = new Logger(SubscriptionFeeder.name);
  private readonly loop: DueWorkLoop;
  /** Whether the last pass left a feed unsettled. */
  private unsettled = false;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly subscriptions: EventSubscriptionRepository,
    private readonly deliveries: WebhookDeliveryRepository,
    private readonly endpoints: WebhookEndpointRepository,
    private readonly credentials: CredentialRepository,
    private readonly feeds: EventFeedService,
    private readonly events: EventLog,
    listener: DoorbellListener,
    drain: DrainState,
  ) {
    this.loop = new DueWorkLoop(this, listener, drain, this.logger);
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Reads the feeds now (a subscription was made or refreshed on this replica). */
  wake(): void {
    this.loop.wake();
  }

  async claimAndLaunch(): Promise<ClaimResult> {
    let more = false;
    this.unsettled = false;
    for (const id of await this.subscriptions.feedableIds()) {
      if (this.loop.isStopping) break;
      const read = await this.feed(id);
      if (read?.hasMore) more = true;
      if (read && !read.settled) this.unsettled = true;
    }
    return more ? 'more' : 'caught_up';
  }

  /** Doorbells and the safety poll, and soon again while a feed is held back by a running transaction. */
  msUntilNextDue(): Promise<number | undefined> {
    return Promise.resolve(this.unsettled ? UNSETTLED_RECHECK_MS : undefined);
  }

  /** Reads one page of the subscription's feed and queues it; undefined when it was not read. */
  private feed(id: string): Promise<Pick<FeedPage, 'hasMore' | 'settled'> | undefined> {
    return this.dataSource.transaction(async (manager) => {
      const subscription = await this.subscriptions.lockFeedable(manager, id);
      if (!subscription) return undefined;
      const caller = (await this.credentials.usable([subscription.owner], manager)).get(subscription.owner);
      const type = eventType(subscription.name);
      if (!caller || !type || !type.readable(this.feeds, caller)) {
        await this.end(manager, subscription, 'access_ended');
        return undefined;
      }
      let page: FeedPage;
      try {
        page = await type.poll(this.feeds, caller, type.arguments.parse(subscription.arguments), {
          cursor: subscription.feedCursor,
          maxEvents: FEED_PAGE,
          maxAgeMs: subscription.replayFloor ? Math.max(0, Date.now() - subscription.replayFloor.getTime()) : undefined,
        });
      } catch (err) {
        // The mailbox its arguments name is no longer the caller's: as a revoked access.
        if (clientFacingError(err)?.code === 'not_found') {
          await this.end(manager, subscription, 'access_ended');
          return undefined;
        }
        throw err;
      }
      const pages = Number(subscription.pages) + (page.events.length > 0 ? 1 : 0);
      if (page.events.length > 0) {
        await this.deliveries.queueFeedDeliveries(
          manager,
          subscription.id,
          'occurrence',
          page.events.map((event) => ({
            messageId: event.id,
            eventType: subscription.name,
            mailboxId: typeof event.data.mailbox_id === 'string' ? event.data.mailbox_id : null,
            payload: { eventId: event.id, name: subscription.name, timestamp: event.timestamp, data: event.data },
          })),
          { page: pages, cursorBefore: subscription.feedCursor, cursorAfter: page.cursor },
        );
        await this.events.ringDoorbell(manager, { kind: 'webhooks' });
      }
      await this.subscriptions.update(manager, subscription.id, {
        feedCursor: page.cursor,
        pages: String(pages),
        ...(page.hasMore ? {} : { replayFloor: null }),
      });
      return page;
    });
  }

  /**
   * Ends the subscription: no more feed, and a signed `terminated` envelope (-32012 Forbidden) to its
   * URL; its endpoint stays a day for that envelope's retries, then housekeeping removes it.
   */
  private async end(manager: EntityManager, subscription: EventSubscriptionEntity, reason: string): Promise<void> {
    await this.subscriptions.update(manager, subscription.id, { endedAt: new Date() });
    const [endpoint] = await this.endpoints.findManyForUpdate(manager, [subscription.id]);
    const deadline = new Date(Date.now() + TERMINATED_DELIVERY_MS);
    if (!endpoint.expiresAt || endpoint.expiresAt > deadline) {
      await this.endpoints.update(manager, endpoint.id, { expiresAt: deadline });
    }
    await this.deliveries.queueFeedDeliveries(
      manager,
      subscription.id,
      'control',
      [
        {
          messageId: `msg_terminated_${randomBytes(12).toString('hex')}`,
          eventType: 'terminated',
          mailboxId: null,
          payload: {
            type: 'terminated',
            error: {
              code: -32012,
              message: 'Forbidden',
              data: { reason, detail: 'The credential that subscribed no longer has access to this event type.' },
            },
          },
        },
      ],
      null,
    );
    await this.events.ringDoorbell(manager, { kind: 'webhooks' });
    this.logger.log({ msg: 'events subscription ended', subscription_id: subscription.id, reason });
  }
}
