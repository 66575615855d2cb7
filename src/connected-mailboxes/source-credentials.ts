import { Injectable } from '@nestjs/common';
import { SecretBox } from '../secrets/secret-box';
import { MailboxSourceEntity } from './mailbox-source.entity';
import { MailboxSourceRepository } from './mailbox-source.repository';
import type { SourceSecrets, SourceSettings } from './source-settings';
import { Xoauth2Tokens } from './xoauth2-tokens';

/** A connected account with its secrets opened: only ever in memory. */
export interface LoadedSource {
  /** Undefined for an account being checked before it is stored. */
  mailboxId: string | undefined;
  revision: number;
  settings: SourceSettings;
  secrets: SourceSecrets;
}

/**
 * The secrets of connected accounts: opened from the database with SecretBox (and re-sealed with
 * the current key when they were sealed with ALCARTA_SECRETS_KEY_PREVIOUS), and turned into what
 * IMAP and SMTP sign in with: the password, or a fresh XOAUTH2 access token.
 */
@Injectable()
export class SourceCredentials {
  constructor(
    private readonly box: SecretBox,
    private readonly sources: MailboxSourceRepository,
    private readonly tokens: Xoauth2Tokens,
  ) {}

  /** The stored account of a mailbox, or undefined when it has none. */
  async load(mailboxId: string): Promise<LoadedSource | undefined> {
    const row = await this.sources.find(mailboxId);
    return row ? this.open(row) : undefined;
  }

  async open(row: MailboxSourceEntity): Promise<LoadedSource> {
    const secrets = JSON.parse(this.box.open(row.sealedSecrets)) as SourceSecrets;
    if (this.box.needsResealing(row.sealedSecrets)) {
      await this.sources.replaceSecrets(row.mailboxId, row.revision, this.box.seal(JSON.stringify(secrets)));
    }
    return { mailboxId: row.mailboxId, revision: row.revision, settings: row.settings, secrets };
  }

  seal(secrets: SourceSecrets): string {
    return this.box.seal(JSON.stringify(secrets));
  }

  async imapAuth(
    source: LoadedSource,
  ): Promise<{ user: string; pass: string } | { user: string; accessToken: string }> {
    const user = source.settings.username;
    if ('password' in source.secrets) return { user, pass: source.secrets.password };
    return { user, accessToken: await this.accessToken(source) };
  }

  async smtpAuth(
    source: LoadedSource,
  ): Promise<{ user: string; pass: string } | { type: 'OAuth2'; user: string; accessToken: string }> {
    const user = source.settings.username;
    if ('password' in source.secrets) return { user, pass: source.secrets.password };
    return { type: 'OAuth2', user, accessToken: await this.accessToken(source) };
  }

  /** The account refused its access token: the next sign-in gets a new one. */
  refused(source: LoadedSource): void {
    const key = this.cacheKey(source);
    if (key !== undefined) this.tokens.forget(key);
  }

  private accessToken(source: LoadedSource): Promise<string> {
    const { settings, secrets } = source;
    if (settings.auth.kind !== 'xoauth2' || 'password' in secrets) {
      throw new Error('the account does not sign in with XOAUTH2');
    }
    const key = this.cacheKey(source);
    return this.tokens.accessToken(key, settings.username, settings.auth, secrets, async (refreshToken) => {
      // The provider rotated the refresh token: the old one may stop working, so keep the new one.
      source.secrets = { ...secrets, refresh_token: refreshToken };
      if (source.mailboxId !== undefined) {
        await this.sources.replaceSecrets(source.mailboxId, source.revision, this.seal(source.secrets));
      }
    });
  }

  /** A stored account's tokens are cached per revision of its settings; a candidate's are not cached. */
  private cacheKey(source: LoadedSource): string | undefined {
    return source.mailboxId === undefined ? undefined : `${source.mailboxId}:${source.revision}`;
  }
}
