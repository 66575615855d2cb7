import { Column, CreateDateColumn, Entity, Index, PrimaryColumn, UpdateDateColumn } from 'typeorm';

/**
 * An OAuth principal (`iss` + `sub`) that has signed in, with the claims of its newest access token
 * that decide what it reaches: what grants match (subject, client, groups) and its scopes. Lets any
 * replica act for the principal's stored waits, tickets and tasks without a token
 * (docs/operators.md, "Identity providers").
 */
@Entity({ name: 'principals' })
/** What a grant's principal is matched by when it is deleted (partial and GIN: owned by the migration). */
@Index('principals_subject', ['subject'])
@Index('principals_client', { synchronize: false })
@Index('principals_groups', { synchronize: false })
export class PrincipalEntity {
  /** The binding id, `prn_…` (see principalId()). */
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text' })
  issuer: string;

  @Column({ type: 'text' })
  subject: string;

  @Column({ name: 'client_id', type: 'text', nullable: true })
  clientId: string | null;

  @Column({ type: 'text', array: true, default: () => "'{}'" })
  groups: string[];

  @Column({ type: 'text', array: true, default: () => "'{}'" })
  scopes: string[];

  @Column({ type: 'text', nullable: true })
  email: string | null;

  /** The `iat` of the token these claims come from: older tokens never overwrite newer claims. */
  @Column({ name: 'claims_issued_at', type: 'timestamptz' })
  claimsIssuedAt: Date;

  @CreateDateColumn({ name: 'first_seen_at', type: 'timestamptz' })
  firstSeenAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
