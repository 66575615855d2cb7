import { MailboxSourceEntity } from './mailbox-source.entity';

/**
 * A connected account as the mailbox view shows it (docs/connected-mailboxes.md): its settings
 * without any secret, and its state. `lag_seconds` is how long some folder has not been caught up
 * with the provider (0 while every folder is idle).
 */
export function sourceView(row: MailboxSourceEntity, now = Date.now()) {
  const { settings } = row;
  return {
    kind: settings.kind,
    host: settings.host,
    port: settings.port,
    tls: settings.tls,
    username: settings.username,
    auth: settings.auth,
    folders: settings.folders,
    sync_from: settings.sync_from,
    smtp: settings.smtp,
    save_sent: settings.save_sent,
    trusted_authserv_ids: settings.trusted_authserv_ids,
    paused: settings.paused,
    state: row.state,
    last_sync_at: row.lastSyncAt?.toISOString() ?? null,
    last_error: row.lastError,
    lag_seconds:
      row.state === 'idle' || !row.behindSince ? 0 : Math.max(0, Math.round((now - row.behindSince.getTime()) / 1000)),
  };
}
