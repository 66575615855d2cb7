import { Injectable } from '@nestjs/common';
import { AppConfig } from '../../config/app-config';
import { Caller } from '../caller';
import { GrantService } from '../grant.service';
import { AccessTokenVerifier } from './access-token-verifier';
import { claimValues, mapScopes, principalId } from './principal-claims';

/**
 * Turns a JWT access token of the configured issuer into a Caller (SPEC 10): scopes from its
 * claims, mailboxes from the grants of its subject, client and groups, bound to its principal.
 */
@Injectable()
export class OAuthAuthenticator {
  private readonly verifier: AccessTokenVerifier | undefined;

  constructor(
    private readonly config: AppConfig,
    private readonly grants: GrantService,
  ) {
    this.verifier = config.oauth ? new AccessTokenVerifier(config.oauth) : undefined;
  }

  get enabled(): boolean {
    return this.verifier !== undefined;
  }

  /** The caller for a valid access token; null for anything else (or when OAuth is not configured). */
  async authenticate(token: string): Promise<Caller | null> {
    const oauth = this.config.oauth;
    if (!this.verifier || !oauth) return null;
    const verified = await this.verifier.verify(token);
    if (!verified) return null;
    const claims = verified.payload;
    const clientId = stringClaim(claims.azp) ?? stringClaim(claims.client_id);
    const mailboxes = await this.grants.mailboxesFor({
      subject: claims.sub,
      clientId,
      groups: claimValues(claims[oauth.groupsClaim]),
    });
    return new Caller(principalId(oauth.issuer, claims.sub), mapScopes(claims, oauth), mailboxes, verified.expiresAt, {
      issuer: oauth.issuer,
      subject: claims.sub,
      clientId,
      email: stringClaim(claims.email),
    });
  }
}

function stringClaim(value: unknown): string | null {
  return typeof value === 'string' && value.length > 0 ? value : null;
}
