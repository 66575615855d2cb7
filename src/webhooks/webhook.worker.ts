import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { AppConfig } from '../config/app-config';
import { DoorbellListener } from '../events/doorbell-listener';
import { BackgroundJob, Job } from '../lifecycle/background-job';
import { DrainState } from '../lifecycle/drain-state';
import { Metrics } from '../metrics/metrics';
import { ClaimResult, claimantId, DueWork, DueWorkLoop } from '../outbox/due-work-loop';
import { PreparedWebhook, WebhookDispatch, WebhookOutcome } from './webhook-dispatch.service';
import { signedHeaders } from './webhook-events';
import {
  postWebhook,
  WebhookConnections,
  WEBHOOK_MAX_RESPONSE_BYTES,
  WEBHOOK_TIMEOUT_MS,
  WebhookHttpOutcome,
} from './webhook-http';

/** Finished attempts recorded in one transaction at most. */
const MAX_RECORD_BATCH = 256;

/** An attempt that has ended, waiting to be recorded with the others that ended meanwhile. */
interface Finished {
  job: PreparedWebhook;
  outcome: WebhookHttpOutcome;
  recorded: () => void;
}

/**
 * The webhook worker of this replica (every replica runs one unless ALCARTA_WEBHOOK_CONCURRENCY is
 * 0), on the outbox's DueWorkLoop: the `webhooks` doorbell (deliveries were queued, on any
 * replica), the next due retry or lapsing lease, or the safety poll wake it. It claims due
 * deliveries (SKIP LOCKED), POSTs each signed outside any transaction, at most
 * ALCARTA_WEBHOOK_CONCURRENCY at once, on kept-alive connections per endpoint origin, and records
 * the attempts that ended while the previous batch was being recorded in one transaction. Claims
 * and records use the worker's own small pool (ALCARTA_DB_WORKER_POOL_SIZE), so requests queued
 * for the main pool do not delay delivery. A delivery's slot is free once its attempt is recorded.
 */
@Job('work')
@Injectable()
export class WebhookWorker implements DueWork, BackgroundJob {
  readonly what = 'webhook worker';
  readonly doorbell = 'webhooks' as const;
  readonly replicaId = claimantId();
  private readonly logger = new Logger(WebhookWorker.name);
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly finished: Finished[] = [];
  private recording = false;
  private readonly connections = new WebhookConnections();
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
    if (this.config.webhookConcurrency > 0) this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  async claimAndLaunch(): Promise<ClaimResult> {
    const free = this.config.webhookConcurrency - this.inFlight.size;
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
      .then(
        (outcome) => this.record(job, outcome),
        (err: Error) => {
          // Nothing was recorded: the lease lapses and some replica delivers it again, same webhook-id.
          this.logger.warn({ msg: 'webhook worker could not make an attempt', delivery_id: id, error: err.message });
        },
      )
      .finally(() => {
        this.inFlight.delete(id);
        this.loop.wake();
      });
    this.inFlight.set(id, posting);
  }

  private post(job: PreparedWebhook): Promise<WebhookHttpOutcome> {
    if (job.unsendable) return Promise.resolve({ kind: 'error', error: job.unsendable, refused: true, durationMs: 0 });
    return postWebhook(
      job.url,
      job.body,
      { ...job.headers, ...signedHeaders(job.webhookId, job.body, job.secrets, new Date()) },
      {
        allowedHosts: this.config.webhookAllowedHosts,
        timeoutMs: WEBHOOK_TIMEOUT_MS,
        maxResponseBytes: WEBHOOK_MAX_RESPONSE_BYTES,
      },
      this.connections,
    );
  }

  /** Resolves once the attempt is recorded (or could not be), with the others of its batch. */
  private record(job: PreparedWebhook, outcome: WebhookHttpOutcome): Promise<void> {
    return new Promise((recorded) => {
      this.finished.push({ job, outcome, recorded });
      void this.recordFinished();
    });
  }

  /** One batch at a time: what ends while a batch is being recorded goes in the next one. */
  private async recordFinished(): Promise<void> {
    if (this.recording || this.finished.length === 0) return;
    this.recording = true;
    const batch = this.finished.splice(0, MAX_RECORD_BATCH);
    try {
      const recorded = await this.dispatch.recordOutcomes(
        this.replicaId,
        batch.map((f) => ({ delivery: f.job.delivery, outcome: f.outcome })),
      );
      batch.forEach((f, i) => this.report(f, recorded[i]));
    } catch (err) {
      // The outcomes could not be recorded (database trouble): the leases lapse and some replica
      // delivers them again, with the same webhook-ids.
      this.logger.warn({
        msg: 'webhook worker could not record attempts',
        delivery_ids: batch.map((f) => f.job.delivery.id),
        error: (err as Error).message,
      });
    } finally {
      for (const f of batch) f.recorded();
      this.recording = false;
      void this.recordFinished();
    }
  }

  private report({ job, outcome }: Finished, recorded: WebhookOutcome): void {
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
