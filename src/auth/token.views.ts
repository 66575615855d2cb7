import { TokenEntity } from './token.entity';

/** A token as the API shows it: never the secret, never its hash. */
/** The columns a token's view shows (an entity, or a row the CLI read without TypeORM). */
export type TokenColumns = Pick<
  TokenEntity,
  'id' | 'name' | 'scopes' | 'mailboxes' | 'expiresAt' | 'revokedAt' | 'createdAt'
>;

export function tokenView(t: TokenColumns) {
  return {
    token_id: t.id,
    name: t.name,
    scopes: t.scopes,
    mailboxes: t.mailboxes,
    expires_at: t.expiresAt?.toISOString() ?? null,
    revoked_at: t.revokedAt?.toISOString() ?? null,
    created_at: t.createdAt.toISOString(),
  };
}

/** The create response (docs/rest-api.md) has exactly these fields; it is the only place the secret appears. */
export function createdTokenView(t: TokenEntity, secret: string) {
  return {
    token_id: t.id,
    secret,
    name: t.name,
    scopes: t.scopes,
    mailboxes: t.mailboxes,
    expires_at: t.expiresAt?.toISOString() ?? null,
  };
}
