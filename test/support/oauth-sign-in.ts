import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { PERSON_CLIENT } from './identity-provider';

/**
 * The SDK's authorization-code sign-in of a person, kept in memory: it records the authorization URL
 * the SDK would open in a browser (the test follows it), and the client, verifier and tokens the SDK
 * saves. With a `clientId` the client is registered at the provider already; without one the SDK
 * registers it dynamically (RFC 7591) and `registered` holds what it got.
 */
export class InMemorySignIn implements OAuthClientProvider {
  authorizationUrl?: URL;
  registered?: OAuthClientInformationMixed;
  private verifier?: string;
  private saved?: OAuthTokens;

  constructor(
    private readonly clientName: string,
    clientId?: string,
  ) {
    if (clientId) this.registered = { client_id: clientId };
  }

  get redirectUrl(): string {
    return PERSON_CLIENT.redirectUri;
  }
  get clientMetadata() {
    return {
      client_name: this.clientName,
      redirect_uris: [PERSON_CLIENT.redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.registered;
  }
  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.registered = info;
  }
  tokens(): OAuthTokens | undefined {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens): void {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }
  codeVerifier(): string {
    if (!this.verifier) throw new Error('no code verifier saved');
    return this.verifier;
  }
}
