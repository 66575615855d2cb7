import { Injectable } from '@nestjs/common';
import { ImapConnector } from './imap-connector';
import { LoadedSource } from './source-credentials';
import { SourceFailure } from './source-failure';

export interface SourceCheckResult {
  imap: { folders: Array<{ name: string; messages: number }> };
  smtp?: { ok: true };
}

/**
 * Checks a connected account as `source/test` and every change of its connection settings do:
 * connects and signs in over IMAP, looks up each synced folder (and `save_sent`), and signs in to
 * the submission server when there is one. It reads and changes nothing in the account.
 */
@Injectable()
export class SourceCheck {
  constructor(private readonly connector: ImapConnector) {}

  async check(source: LoadedSource): Promise<SourceCheckResult> {
    const { settings } = source;
    const client = await this.connector.open(source);
    const folders: SourceCheckResult['imap']['folders'] = [];
    try {
      for (const name of [...settings.folders, ...(settings.save_sent ? [settings.save_sent] : [])]) {
        const status = await client.status(name, { messages: true }).catch(() => false as const);
        if (!status) {
          throw new SourceFailure(
            'folder',
            'source_folder_missing',
            `The account ${settings.username} has no folder "${name}".`,
          );
        }
        if (settings.folders.includes(name)) folders.push({ name, messages: status.messages ?? 0 });
      }
    } finally {
      await client.logout().catch(() => client.close());
    }
    if (!settings.smtp) return { imap: { folders } };
    const transport = await this.connector.smtp(source);
    try {
      await transport.verify();
    } catch (err) {
      const message = (err as Error)?.message ?? String(err);
      throw new SourceFailure(
        'smtp',
        'source_smtp_failed',
        `The submission server ${settings.smtp.host}:${settings.smtp.port} could not be used: ${message}.`,
      );
    } finally {
      transport.close();
    }
    return { imap: { folders }, smtp: { ok: true } };
  }
}
