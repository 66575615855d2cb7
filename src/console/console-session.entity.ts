import { Column, CreateDateColumn, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A person signed in to the console (docs/approvers.md), behind an HttpOnly cookie that holds the secret.
 * What the person may see and decide is read from the credential at each request: a static token
 * (token sign-in) or an OAuth principal (`prn_…`, OpenID Connect sign-in).
 */
@Entity({ name: 'console_sessions' })
@Index('console_sessions_expiry', ['expiresAt'])
export class ConsoleSessionEntity {
  /** SHA-256 of the cookie's secret, hex. The secret itself is never stored. */
  @PrimaryColumn({ name: 'secret_hash', type: 'character', length: 64 })
  secretHash: string;

  /** The token id, or the principal's `prn_…` id. */
  @Column({ name: 'credential_id', type: 'text' })
  credentialId: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;
}
