import { Injectable } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import { ConsolePendingFeedService } from './console-pending-feed.service';

/** The console's gauges, read at scrape time from live state (like MetricsCollectors): nothing drifts. */
@Injectable()
export class ConsoleMetrics {
  constructor(metrics: Metrics, feed: ConsolePendingFeedService) {
    new Gauge({
      name: 'alcarta_console_live_streams',
      help: 'Live pending-list streams (Server-Sent Events) of the console open on this process.',
      registers: [metrics.registry],
      collect() {
        this.set(feed.openStreams);
      },
    });
  }
}
