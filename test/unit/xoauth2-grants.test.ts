import 'reflect-metadata';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { jwtVerify } from 'jose';
import { AppConfig } from '#app/config/app-config.js';
import { validateEnvironment } from '#app/config/environment.js';
import { SourceFailure } from '#app/connected-mailboxes/source-failure.js';
import { Xoauth2Tokens } from '#app/connected-mailboxes/xoauth2-tokens.js';

/**
 * The three ways a connected account gets XOAUTH2 access tokens (docs/connected-mailboxes.md,
 * "Provider setup"), each against a token endpoint over real HTTP that checks the request as the
 * provider would: a refresh token (rotated ones kept), client credentials (Entra ID app-only access),
 * and a service account's RS256 assertion for the mailbox's user (Google domain-wide delegation).
 */
describe('XOAUTH2 grants', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  let server: Server;
  let tokenUrl: string;
  const forms: URLSearchParams[] = [];
  type Answer = { status: number; body: Record<string, unknown> };
  let answer: (form: URLSearchParams) => Answer | Promise<Answer>;
  const tokens = new Xoauth2Tokens(new AppConfig(validateEnvironment({ ALCARTA_IMAP_CONNECT_TIMEOUT_SECONDS: '5' })));
  const settings = (grant: 'refresh_token' | 'client_credentials' | 'jwt_bearer', scope: string | null = 'mail') => ({
    kind: 'xoauth2' as const,
    grant,
    token_url: tokenUrl,
    client_id: grant === 'jwt_bearer' ? 'svc@project.iam.example' : 'client-1',
    scope,
  });
  const noRotation = () => Promise.reject(new Error('no rotation expected'));

  before(async () => {
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (chunk: Buffer) => (text += chunk.toString()));
      req.on('end', () => {
        const form = new URLSearchParams(text);
        forms.push(form);
        void Promise.resolve(answer(form)).then(({ status, body }) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    tokenUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
  });

  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('a refresh token is exchanged once and the access token reused until shortly before it expires; a rotated refresh token is kept', async () => {
    forms.length = 0;
    answer = () => ({ status: 200, body: { access_token: 'at-1', expires_in: 3600, refresh_token: 'rt-2' } });
    const rotated: string[] = [];
    const secrets = { client_secret: 'cs', refresh_token: 'rt-1' };
    const first = await tokens.accessToken(
      'mbx_a:1',
      'support@example.test',
      settings('refresh_token'),
      secrets,
      (rt) => {
        rotated.push(rt);
        return Promise.resolve();
      },
    );
    const second = await tokens.accessToken(
      'mbx_a:1',
      'support@example.test',
      settings('refresh_token'),
      secrets,
      noRotation,
    );
    assert.equal(first, 'at-1');
    assert.equal(second, 'at-1');
    assert.equal(forms.length, 1, 'one grant for both');
    assert.deepEqual(Object.fromEntries(forms[0]), {
      grant_type: 'refresh_token',
      refresh_token: 'rt-1',
      client_id: 'client-1',
      client_secret: 'cs',
      scope: 'mail',
    });
    assert.deepEqual(rotated, ['rt-2']);
  });

  it('a token close to its expiry is refreshed before it is used', async () => {
    forms.length = 0;
    // 4 s of life: the margin (at least 5 s) makes it too old to present at once.
    answer = () => ({ status: 200, body: { access_token: `at-${forms.length}`, expires_in: 4 } });
    const secrets = { client_secret: null, refresh_token: 'rt-x' };
    await tokens.accessToken('mbx_b:1', 'u', settings('refresh_token'), secrets, noRotation);
    const next = await tokens.accessToken('mbx_b:1', 'u', settings('refresh_token'), secrets, noRotation);
    assert.equal(next, 'at-2');
    assert.equal(forms.length, 2);
  });

  it('client credentials: the application signs in for itself (no refresh token)', async () => {
    forms.length = 0;
    answer = () => ({ status: 200, body: { access_token: 'app-token', expires_in: 3600 } });
    const token = await tokens.accessToken(
      'mbx_c:1',
      'shared@example.test',
      settings('client_credentials', 'https://outlook.office365.com/.default'),
      { client_secret: 'app-secret' },
      noRotation,
    );
    assert.equal(token, 'app-token');
    assert.deepEqual(Object.fromEntries(forms[0]), {
      grant_type: 'client_credentials',
      client_id: 'client-1',
      client_secret: 'app-secret',
      scope: 'https://outlook.office365.com/.default',
    });
  });

  it("a service account's assertion is signed with its key, for the mailbox's user as subject", async () => {
    forms.length = 0;
    answer = async (form) => {
      const { payload, protectedHeader } = await jwtVerify(form.get('assertion')!, publicKey, {
        issuer: 'svc@project.iam.example',
        audience: tokenUrl,
        subject: 'billing@example.test',
      });
      assert.equal(protectedHeader.alg, 'RS256');
      assert.equal(payload.scope, 'https://mail.google.com/');
      assert.ok(payload.exp! - payload.iat! <= 3600);
      return { status: 200, body: { access_token: 'sa-token', expires_in: 3600 } };
    };
    const token = await tokens.accessToken(
      'mbx_d:1',
      'billing@example.test',
      settings('jwt_bearer', 'https://mail.google.com/'),
      { client_secret: null, private_key: pem },
      noRotation,
    );
    assert.equal(token, 'sa-token');
    assert.equal(forms[0].get('grant_type'), 'urn:ietf:params:oauth:grant-type:jwt-bearer');
  });

  it('a refused grant is an authentication failure; a provider error or no answer is unreachable', async () => {
    answer = () => ({ status: 400, body: { error: 'invalid_grant' } });
    const refused = await tokens
      .accessToken(
        'mbx_e:1',
        'u',
        settings('refresh_token'),
        { client_secret: null, refresh_token: 'revoked' },
        noRotation,
      )
      .catch((e: unknown) => e);
    assert.ok(refused instanceof SourceFailure);
    assert.equal(refused.reason, 'source_auth_failed');
    assert.match(refused.message, /invalid_grant/);
    assert.doesNotMatch(refused.message, /revoked/, 'the refresh token is never in the message');

    answer = () => ({ status: 503, body: {} });
    const down = await tokens
      .accessToken('mbx_f:1', 'u', settings('refresh_token'), { client_secret: null, refresh_token: 'rt' }, noRotation)
      .catch((e: unknown) => e);
    assert.ok(down instanceof SourceFailure);
    assert.equal(down.reason, 'source_unreachable');
  });
});
