import { Injectable } from '@nestjs/common';
import { hasUnstorableText } from '../../common/text-safety';
import { AppConfig } from '../../config/app-config';
import { Caller } from '../../kernel/caller';
import { GrantService } from '../grant.service';
import { PrincipalService } from '../principal.service';
import { AccessTokenVerifier } from './access-token-verifier';
import { claimValues, clientIdOf, mapScopes, principalId } from './principal-claims';

/**
 * Turns a JWT access token of the configured issuer into a Caller (docs/operators.md, "Identity
 * providers"): scopes from its claims, mailboxes from the grants of its subject, client and groups,
 * bound to its principal.
 */
@Injectable()
export class OAuthAuthenticator {
  private readonly verifier: AccessTokenVerifier | undefined;

  constructor(
    private readonly config: AppConfig,
    private readonly grants: GrantService,
    private readonly principals: PrincipalService,
  ) {
    this.verifier = config.oauth ? new AccessTokenVerifier(config.oauth) : undefined;
  }

  get enabled(): boolean {
    return this.verifier !== undefined;
  }

  /**
   * The caller for a valid access token; null for anything else (or when OAuth is not configured).
   * Throws identity_provider_unavailable when the issuer's keys cannot be had to check the token.
   */
  async authenticate(token: string): Promise<Caller | null> {
    const oauth = this.config.oauth;
    if (!this.verifier || !oauth) return null;
    const verified = await this.verifier.verify(token);
    // A principal is kept in the database by its subject: one that cannot be stored cannot sign in.
    if (!verified || hasUnstorableText(verified.payload.sub)) return null;
    const claims = verified.payload;
    const id = principalId(oauth.issuer, claims.sub);
    const clientId = storable(clientIdOf(claims));
    const groups = claimValues(claims[oauth.groupsClaim]).filter((g) => !hasUnstorableText(g));
    const scopes = mapScopes(claims, oauth);
    const email = storable(typeof claims.email === 'string' && claims.email.length > 0 ? claims.email : null);
    // Before the grants are read: a grant deleted after this point must find the principal, and
    // end what this request parks (see Credential.authenticatedAt).
    const authenticatedAt = Date.now();
    await this.principals.record({
      id,
      issuer: oauth.issuer,
      subject: claims.sub,
      clientId,
      groups,
      scopes: [...scopes],
      email,
      issuedAt: new Date(typeof claims.iat === 'number' ? claims.iat * 1000 : authenticatedAt),
    });
    const mailboxes = await this.grants.mailboxesFor({ subject: claims.sub, clientId, groups });
    return new Caller(id, scopes, mailboxes, {
      expiresAt: verified.expiresAt,
      principal: { issuer: oauth.issuer, subject: claims.sub, clientId, email, groups },
      authenticatedAt,
    });
  }
}

function storable(value: string | null): string | null {
  return value !== null && !hasUnstorableText(value) ? value : null;
}
