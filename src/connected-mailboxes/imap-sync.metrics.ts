import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { Metrics } from '../metrics/metrics';
import type { FolderState } from './source-settings';

const FOLDER_STATES: readonly FolderState[] = ['connecting', 'idle', 'syncing', 'auth_failed', 'unreachable'];

/** What the metrics read of a folder held here. */
export interface HeldFolderState {
  state: FolderState;
  behindSince: number | undefined;
}

/**
 * The metrics of connected mailboxes, per replica (each reports the folders it holds):
 * connections by state, the largest lag, messages synced, sign-ins refused.
 */
@Injectable()
export class ImapSyncMetrics {
  readonly synced: Counter<'phase'>;
  readonly authFailures: Counter;
  private held: () => readonly HeldFolderState[] = () => [];

  constructor(metrics: Metrics) {
    const held = () => this.held();
    new Gauge({
      name: 'alcarta_imap_connections',
      help: 'Connected folders held by this replica, by the state of their IMAP connection.',
      labelNames: ['state'],
      registers: [metrics.registry],
      collect() {
        const folders = held();
        for (const state of FOLDER_STATES) this.set({ state }, folders.filter((f) => f.state === state).length);
      },
    });
    new Gauge({
      name: 'alcarta_imap_lag_seconds',
      help: 'How long the folder held by this replica that is furthest behind its provider has not been caught up (0: all are).',
      registers: [metrics.registry],
      collect() {
        const now = Date.now();
        const since = held().map((f) => f.behindSince ?? now);
        this.set(since.length > 0 ? (now - Math.min(...since)) / 1000 : 0);
      },
    });
    this.synced = new Counter({
      name: 'alcarta_imap_messages_synced_total',
      help: 'Messages stored from connected folders by this replica: live (new mail) or initial (the sync of older mail).',
      labelNames: ['phase'],
      registers: [metrics.registry],
    });
    this.authFailures = new Counter({
      name: 'alcarta_imap_auth_failures_total',
      help: 'Sign-ins to connected accounts refused (a wrong password, a refresh token refused), by this replica.',
      registers: [metrics.registry],
    });
  }

  /** The folders held here, read at each scrape. */
  watch(held: () => readonly HeldFolderState[]): void {
    this.held = held;
  }
}
