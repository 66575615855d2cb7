import { Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { BackgroundJobs } from './background-job';
import { DrainState } from './drain-state';

@Global()
@Module({ imports: [DiscoveryModule], providers: [DrainState, BackgroundJobs], exports: [DrainState, BackgroundJobs] })
export class LifecycleModule {}
