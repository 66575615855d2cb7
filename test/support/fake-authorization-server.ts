import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { CryptoKey, exportJWK, exportSPKI, generateKeyPair, JWK } from 'jose';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
  publicPem: string;
}

export async function signingKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return {
    kid,
    privateKey,
    publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' },
    publicPem: await exportSPKI(publicKey),
  };
}

/**
 * How the whole server misbehaves: `hang` accepts every request and never answers, `garbage`
 * answers every path 200 with a body that is not JSON.
 */
export type AuthorizationServerFailure = 'hang' | 'garbage';

/**
 * Issuer metadata and a JWKS on loopback; `keys` is what the JWKS serves, `down` makes the JWKS
 * answer 503, `failure` makes every path fail. `requests` counts every request received.
 */
export class FakeAuthorizationServer {
  keys: SigningKey[] = [];
  down = false;
  failure: AuthorizationServerFailure | undefined;
  jwksRequests = 0;
  requests = 0;
  private server: Server | undefined;
  issuer = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.requests++;
      if (req.url === '/jwks') this.jwksRequests++;
      if (this.failure === 'hang') return;
      if (this.failure === 'garbage') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('<html>Service temporarily unavailable</html>');
        return;
      }
      if (req.url === '/.well-known/oauth-authorization-server') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ issuer: this.issuer, jwks_uri: `${this.issuer}/jwks` }));
      } else if (req.url === '/jwks') {
        if (this.down) {
          res.writeHead(503).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ keys: this.keys.map((k) => k.publicJwk) }));
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.issuer = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
    this.server?.closeAllConnections();
    await closed;
  }
}
