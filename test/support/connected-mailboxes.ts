import { randomBytes } from 'node:crypto';
import { RestClient } from './rest';
import { TestDovecot } from './dovecot';
import { waitFor } from './wait-for';

/** A key for ALCARTA_SECRETS_KEY (32 random bytes, base64). */
export function secretsKey(): string {
  return randomBytes(32).toString('base64');
}

let users = 0;

/** A new account on the Dovecot: its username (an address) and password. */
export async function dovecotAccount(dovecot: TestDovecot): Promise<{ username: string; password: string }> {
  const username = `acct-${process.pid}-${++users}-${randomBytes(3).toString('hex')}@example.test`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  await dovecot.addUser(username, password);
  return { username, password };
}

/** The `source` of a mailbox connected to `account` on the test Dovecot (plain IMAP on loopback). */
export function imapSource(
  dovecot: TestDovecot,
  account: { username: string; password: string },
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    kind: 'imap',
    host: dovecot.host,
    port: dovecot.imapPort,
    tls: 'none',
    username: account.username,
    auth: { password: account.password },
    ...extra,
  };
}

/** A small RFC 5322 message. */
export function rawMail(fields: {
  from?: string;
  to: string;
  subject: string;
  messageId?: string;
  body?: string;
}): string {
  return [
    `From: ${fields.from ?? 'Customer <customer@example.org>'}`,
    `To: ${fields.to}`,
    `Subject: ${fields.subject}`,
    `Message-ID: ${fields.messageId ?? `<${randomBytes(8).toString('hex')}@example.org>`}`,
    `Date: ${new Date().toUTCString()}`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    fields.body ?? `Body of ${fields.subject}`,
    '',
  ].join('\r\n');
}

/** Waits until the mailbox's source reaches `state` (as GET /v1/mailboxes/{id} shows it) and returns its view. */
export async function sourceReaches(
  admin: RestClient,
  mailboxId: string,
  state: string,
  timeoutMs = 20_000,
): Promise<Record<string, any>> {
  return waitFor(
    `the source of ${mailboxId} to be ${state}`,
    async () => {
      const res = await admin.get(`/v1/mailboxes/${mailboxId}`);
      return res.body?.source?.state === state ? (res.body.source as Record<string, any>) : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}
