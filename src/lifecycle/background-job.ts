import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';

/**
 * When a job starts, in this order (and stops, in the reverse order):
 *  - `listen`: the doorbell listener. It starts first and is awaited, so that start-up fails fast
 *    when the database is down, and every later job hears the bells committed from then on; the
 *    wait lease names its session.
 *  - `watch`: the wait engine, which subscribes to the doorbell and takes the lease of persisted waits.
 *  - `work`: sweepers, mail workers and housekeeping, independent of one another.
 */
export const JOB_STAGES = ['listen', 'watch', 'work'] as const;
export type JobStage = (typeof JOB_STAGES)[number];

/**
 * A process-wide job of the server (a listener, a sweeper, a worker): started by BackgroundJobs after
 * the migrations, stopped by it when the application closes. The CLI never starts them.
 */
export interface BackgroundJob {
  /** Starts the job; a promise delays the next stage until it resolves. */
  start(): void | Promise<void>;
  /** Stops the job and waits for the work in progress; harmless when it never started. */
  stop(): void | Promise<void>;
}

/** Marks a provider as a background job of a stage: `@Job('work')` on a class that implements BackgroundJob. */
export const Job = DiscoveryService.createDecorator<JobStage>();

/** Every background job of the application, found by their `@Job` marker, with one lifecycle. */
@Injectable()
export class BackgroundJobs implements OnModuleDestroy {
  constructor(private readonly discovery: DiscoveryService) {}

  /** The jobs stage by stage, each stage in the order its modules were registered. */
  private stages(): Array<{ stage: JobStage; jobs: Array<{ job: BackgroundJob }> }> {
    const found = this.discovery.getProviders({ metadataKey: Job.KEY }).flatMap((wrapper) => {
      const stage = this.discovery.getMetadataByDecorator(Job, wrapper);
      const job = wrapper.instance as BackgroundJob | undefined;
      return stage && job ? [{ stage, job }] : [];
    });
    return JOB_STAGES.map((stage) => ({ stage, jobs: found.filter((f) => f.stage === stage) }));
  }

  /** Starts every job, stage after stage (server only, after the migrations). */
  async startAll(): Promise<void> {
    for (const { jobs } of this.stages()) {
      for (const { job } of jobs) await job.start();
    }
  }

  /** Stops every job, the last stage first: workers before the engine, the engine before the listener. */
  async onModuleDestroy(): Promise<void> {
    for (const { jobs } of this.stages().reverse()) {
      await Promise.all(jobs.map(async ({ job }) => job.stop()));
    }
  }
}
