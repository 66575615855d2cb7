import { Injectable } from '@nestjs/common';

/** Who a JWT names, as grants match it (SPEC 10): its subject, its client, its groups. */
export interface PrincipalClaims {
  subject: string;
  clientId: string | null;
  groups: readonly string[];
}

/**
 * Grants of mailboxes to OAuth principals (`sub:…`, `client:…`, `group:…`). An OAuth principal
 * reaches the union of the mailboxes granted to its subject, its client and its groups.
 */
@Injectable()
export class GrantService {
  mailboxesFor(_principal: PrincipalClaims): Promise<string[]> {
    return Promise.resolve([]);
  }
}
