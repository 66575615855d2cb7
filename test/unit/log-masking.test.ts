import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createRootLogger, serializeError } from '#app/logging/logger.js';
import { maskSecretPath, maskSecretsInEcho, scrubSecrets } from '#app/logging/secret-masking.js';

/** A JWT as identity providers issue them: header, claims and an RS256-sized signature. */
const header = Buffer.from(JSON.stringify({ alg: 'RS256', kid: 'key-1', typ: 'at+jwt' })).toString('base64url');
const claims = Buffer.from(JSON.stringify({ iss: 'https://idp.example', sub: 'agent-7' })).toString('base64url');
const signature = Buffer.alloc(256, 7).toString('base64url').replace(/^./, '-');
const JWT = `${header}.${claims}.${signature}`;

/** "no secrets in logs" (docs/operators.md, "Limits and hardening"), extended to JWTs sent as bearer tokens (docs/operators.md "Identity providers"). */
describe('log masking', () => {
  it('masks a JWT alone, in a path, in a query string, in a header echo and percent-encoded', () => {
    for (const text of [
      JWT,
      `/v1/waits/${JWT}/socket`,
      `GET /v1/mailboxes?access_token=${JWT}&x=1`,
      `Bearer ${JWT}`,
      `"token":"${JWT}"`,
      `prefix${JWT}suffix`,
      JWT.replaceAll('.', '%2E'),
      JWT.replaceAll('.', '%2e'),
    ]) {
      const masked = scrubSecrets(text);
      assert.ok(!masked.includes(claims), `claims left in ${masked}`);
      assert.ok(!masked.includes(signature.slice(0, 40)), `signature left in ${masked}`);
      assert.match(masked, /eyJ\[REDACTED\]/);
    }
    assert.equal(scrubSecrets(`/v1/waits/${JWT}/socket`), '/v1/waits/eyJ[REDACTED]/socket');
  });

  it('masks unsigned tokens (empty signature) and five-segment JWEs', () => {
    assert.equal(scrubSecrets(`a ${header}.${claims}. b`), 'a eyJ[REDACTED] b');
    assert.equal(scrubSecrets(`a ${header}.key.iv.ciphertext.tag b`), 'a eyJ[REDACTED] b');
  });

  it('leaves text alone that only looks a little like a token', () => {
    for (const text of ['eyJ', 'see eyJhbGciOi in the docs.', `${header}.${claims}`, 'a.b.c', 'v1.2.3']) {
      assert.equal(scrubSecrets(text), text);
    }
  });

  it('still masks alc_ and wst_ secrets beside a JWT', () => {
    assert.equal(
      scrubSecrets(`alc_0123456789abcdef and ${JWT} and wst%5Fabcdefgh12`),
      'alc_[REDACTED] and eyJ[REDACTED] and wst_[REDACTED]',
    );
  });

  it('masks a JWT before an error message is truncated, so a cut cannot leave part of it', () => {
    const err = new Error(`${'x'.repeat(990)} ${JWT}`);
    const logged = serializeError(err);
    assert.ok(!logged.message.includes(claims.slice(0, 10)), logged.message);
    assert.ok(!logged.stack?.includes(claims.slice(0, 10)));
  });

  it('masks a JWT anywhere in a written line: message, fields, nested objects, errors', () => {
    let out = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        out += chunk.toString();
        done();
      },
    });
    const logger = createRootLogger('info', sink);
    logger.info({ path: `/x/${JWT}`, nested: { value: `q=${JWT}` }, err: new Error(`bad ${JWT}`) }, `msg ${JWT}`);
    assert.ok(out.length > 0);
    assert.ok(!out.includes(claims), out);
    assert.ok(!out.includes(signature.slice(0, 40)), out);
    // path, nested value, error message, its stack, the message itself
    assert.equal(out.match(/eyJ\[REDACTED\]/g)?.length, 5, out);
  });

  it('masks link tokens and other secret-shaped path segments, keeping ids readable', () => {
    const token = 'Zk3s9dVbq0p1N2m3L4k5J6h7G8f9D0s1A2z3X4c5V6b';
    assert.equal(maskSecretPath(`/console/links/${token}`), '/console/links/[REDACTED]');
    assert.equal(maskSecretPath(`/console/links/${token.replace('b', '%62')}/x`), '/console/links/[REDACTED]/x');
    assert.equal(maskSecretPath(`/console/links/%E0%A4%A${token}`), '/console/links/[REDACTED]');
    assert.equal(maskSecretPath(`/v1/tokens/alc_${'A1b2C3d4'.repeat(6)}`), '/v1/tokens/alc_[REDACTED]');
    const ids = '/v1/mailboxes/mbx_0123456789abcdefABCDEF/messages/msg_0123456789abcdefABCDEF';
    assert.equal(maskSecretPath(ids), ids);
    assert.equal(maskSecretPath('/console/links/thisTokenWasNeverIssued'), '/console/links/thisTokenWasNeverIssued');
    assert.equal(scrubSecrets(`Cannot GET /console/links/${token}.`), 'Cannot GET /console/links/[REDACTED].');
    assert.equal(maskSecretsInEcho(`Failed to decode param '${token}%ZZ'`), "Failed to decode param '[REDACTED]%ZZ'");
  });

  it('cuts long paths and echoes where no secret can be left half', () => {
    const long = `/v1/${'segment/'.repeat(200)}${'x'.repeat(20)}${'eyJ'.repeat(5000)}`;
    const masked = maskSecretPath(long);
    assert.ok(masked.length <= 1026 && masked.endsWith('/segment/…'), masked.slice(-40));
    const echo = maskSecretsInEcho(
      `Failed to decode param '${'a'.repeat(480)}${'Zk3s9dVbq0p1N2m3L4k5J6h7G8f9D0s1A2z3X4c5V6b'}%ZZ'`,
    );
    assert.equal(echo, "Failed to decode param '…");
  });

  it('masks URL passwords, console cookies and secret parameters in free text', () => {
    assert.equal(
      scrubSecrets('connect smtp://relay-user:relay-secret-pw@127.0.0.1:2525 failed'),
      'connect smtp://relay-user:[REDACTED]@127.0.0.1:2525 failed',
    );
    assert.equal(
      scrubSecrets('cookie: alcarta_console=abcdefgh12345678; alcarta_console_sign_in=zyxwvuts98765432'),
      'cookie: alcarta_console=[REDACTED]; alcarta_console_sign_in=[REDACTED]',
    );
    assert.equal(
      scrubSecrets('GET /console/sign-in/callback?code=AbCdEfGh123456&state=q1w2e3r4t5y6u7&iss=x'),
      'GET /console/sign-in/callback?code=[REDACTED]&state=[REDACTED]&iss=x',
    );
    assert.equal(scrubSecrets('_csrf=AbCdEfGh123456&decision=approved'), '_csrf=[REDACTED]&decision=approved');
    for (const text of ['WHERE state = $1', '"state":"pending"', 'exit code=1', 'see https://example.com/docs']) {
      assert.equal(scrubSecrets(text), text);
    }
  });
});
