import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'tokens' })
export class TokenEntity {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text' })
  name: string;

  /** SHA-256 of the secret, hex. The secret itself is never stored. */
  @Column({ name: 'secret_hash', type: 'character', length: 64, unique: true })
  secretHash: string;

  @Column({ type: 'text', array: true })
  scopes: string[];

  /** Mailbox ids the token may use, or `['*']` for all of them. */
  @Column({ type: 'text', array: true })
  mailboxes: string[];

  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
