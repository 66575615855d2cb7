import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { AppConfig } from '../config/app-config';
import { DoorbellListener } from '../events/doorbell-listener';
import { BackgroundJob, Job } from '../lifecycle/background-job';
import { DrainState } from '../lifecycle/drain-state';
import { Metrics } from '../metrics/metrics';
import { ClaimResult, claimantId, DueWork, DueWorkLoop } from '../outbox/due-work-loop';
import { PreparedWebhook, WebhookDispatch } from './webhook-dispatch.service';
import { signedHeaders } from './webhook-events';
import { postWebhook, WEBHOOK_MAX_RESPONSE_BYTES, WEBHOOK_TIMEOUT_MS, WebhookHttpOutcome } from './webhook-http';

/** Webhook POSTs one replica makes at the same time. */
export const MAX_CONCURRENT_POSTS = 16;

/**
 * The webhook worker of this replica (every replica runs one), on the outbox's DueWorkLoop: the
 * `webhooks` doorbell (deliveries were queued, on any replica), the next due retry or lapsing lease,
 * or the safety poll wake it. It claims due deliveries (SKIP LOCKED), POSTs each signed outside any
 * transaction, at most MAX_CONCURRENT_POSTS at once, and records the attempt.
 */
@Job('work')
@Injectable()
export class WebhookWorker implements DueWork, BackgroundJob {
  readonly what = 'webhook worker';
  readonly doorbell = 'webhooks' as const;
  readonly replicaId = claimantId();
  private readonly logger = new Logger(WebhookWorker.name);
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly outcomes: Counter<'outcome'>;
  private readonly loop: DueWorkLoop;

  constructor(
    private readonly config: AppConfig,
    private readonly dispatch: WebhookDispatch,
    listener: DoorbellListener,
    drain: DrainState,
    metrics: Metrics,
  ) {
    this.outcomes = new Counter({
      name: 'alcarta_webhook_deliveries_total',
      help: 'Webhook delivery attempts by this process, by outcome (delivered, retrying, failed, gone, lost_claim).',
      labelNames: ['outcome'],
      registers: [metrics.registry],
    });
    this.loop = new DueWorkLoop(this, listener, drain, this.logger);
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  async claimAndLaunch(): Promise<ClaimResult> {
    const free = MAX_CONCURRENT_POSTS - this.inFlight.size;
    if (free <= 0) return 'full';
    // The lease (ALCARTA_WEBHOOK_LEASE_SECONDS, at least 15 s) outlasts one attempt (WEBHOOK_TIMEOUT_MS),
    // so while replicas are healthy nobody takes a delivery another is making; one that died mid-POST
    // leaves a lease that lapses, and another replica delivers it again with the same webhook-id.
    const claimed = await this.dispatch.claim(this.replicaId, this.config.webhookLeaseMs, free);
    for (const job of claimed) this.launch(job);
    return claimed.length < free ? 'caught_up' : 'more';
  }

  msUntilNextDue(): Promise<number | undefined> {
    return this.dispatch.msUntilNextDue();
  }

  private launch(job: PreparedWebhook): void {
    const id = job.delivery.id;
    const posting = this.post(job)
      .catch((err: Error) => {
        // The outcome could not be recorded (database trouble): the lease lapses and some replica
        // delivers it again, with the same webhook-id.
        this.logger.warn({ msg: 'webhook worker could not record an attempt', delivery_id: id, error: err.message });
      })
      .finally(() => {
        this.inFlight.delete(id);
        this.loop.wake();
      });
    this.inFlight.set(id, posting);
  }

  private async post(job: PreparedWebhook): Promise<void> {
    const outcome: WebhookHttpOutcome = await postWebhook(
      job.url,
      job.body,
      { ...job.headers, ...signedHeaders(job.webhookId, job.body, job.secrets, new Date()) },
      {
        allowedHosts: this.config.webhookAllowedHosts,
        timeoutMs: WEBHOOK_TIMEOUT_MS,
        maxResponseBytes: WEBHOOK_MAX_RESPONSE_BYTES,
      },
    );
    const recorded = await this.dispatch.recordOutcome(this.replicaId, job.delivery, outcome);
    this.outcomes.inc({ outcome: recorded });
    this.logger.log({
      msg: 'webhook delivery attempt',
      delivery_id: job.delivery.id,
      endpoint_id: job.delivery.endpointId,
      ...(outcome.kind === 'response' ? { status_code: outcome.status } : { error: outcome.error }),
      outcome: recorded,
    });
  }

  /** Drain: POSTs in flight get half the grace period; the rest lapse to the other replicas. */
  async drained(): Promise<void> {
    if (this.inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.config.shutdownGraceMs / 2);
    });
    await Promise.race([Promise.all(this.inFlight.values()), grace]).finally(() => clearTimeout(timer));
  }
}
