import { GrantEntity } from './grant.entity';

/** A grant as the API shows it (from an entity, or a row the CLI read without TypeORM). */
export function grantView(g: Pick<GrantEntity, 'id' | 'principal' | 'mailboxes' | 'createdAt'>) {
  return {
    grant_id: g.id,
    principal: g.principal,
    mailboxes: g.mailboxes,
    created_at: g.createdAt.toISOString(),
  };
}
