import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { senderVerdict } from '#app/mail/authentication-results.js';
import {
  authenticationResultsHeaders,
  parseAuthenticationResults,
  trustedProviderOutcomes,
} from '#app/mail/provider-authentication-results.js';

/** As Gmail writes it (unfolded). */
const GOOGLE =
  'mx.google.com; dkim=pass header.i=@example.com header.s=20230601 header.b=Ab12Cd34; ' +
  'spf=pass (google.com: domain of alice@example.com designates 209.85.220.41 as permitted sender) ' +
  'smtp.mailfrom=alice@example.com; dmarc=pass (p=NONE sp=NONE dis=NONE) header.from=example.com';

/** As Microsoft 365 writes it: no authserv-id, and `;` without a space between some results. */
const MICROSOFT =
  'spf=pass (sender IP is 209.85.208.45) smtp.mailfrom=example.com; dkim=pass (signature was verified) ' +
  'header.d=example.com;dmarc=pass action=none header.from=example.com;compauth=pass reason=100';

/** As Fastmail writes it, with methods of its own and an ARC result. */
const FASTMAIL =
  'mx6.messagingengine.com; dkim=pass (2048-bit rsa key sha256) header.d=example.com header.i=@example.com ' +
  'header.b=AbC12 header.a=rsa-sha256 header.s=fm1 x-bits=2048; dmarc=fail policy.published-domain-policy=reject ' +
  'header.from=example.com; iprev=pass smtp.remote-ip=192.0.2.1 (mail.example.com); spf=softfail ' +
  'smtp.mailfrom=bob@example.com smtp.helo=mail.example.com; arc=none (no signatures found); x-aligned-from=pass';

describe('parseAuthenticationResults', () => {
  it("reads Google's field: the authserv-id, each method's result and its properties, comments dropped", () => {
    const field = parseAuthenticationResults(GOOGLE);
    assert.equal(field.authservId, 'mx.google.com');
    assert.equal(field.version, undefined);
    assert.deepEqual(field.results, [
      {
        method: 'dkim',
        result: 'pass',
        properties: { 'header.i': '@example.com', 'header.s': '20230601', 'header.b': 'Ab12Cd34' },
      },
      { method: 'spf', result: 'pass', properties: { 'smtp.mailfrom': 'alice@example.com' } },
      { method: 'dmarc', result: 'pass', properties: { 'header.from': 'example.com' } },
    ]);
  });

  it("reads Microsoft 365's field, which names no authserv-id", () => {
    const field = parseAuthenticationResults(MICROSOFT);
    assert.equal(field.authservId, undefined);
    assert.deepEqual(
      field.results.map((r) => [r.method, r.result, r.reason]),
      [
        ['spf', 'pass', undefined],
        ['dkim', 'pass', undefined],
        ['dmarc', 'pass', undefined],
        ['compauth', 'pass', '100'],
      ],
    );
    assert.deepEqual(field.results[1].properties, { 'header.d': 'example.com' });
  });

  it('reads a version, `none`, method versions, quoted strings and nested or escaped comments', () => {
    assert.deepEqual(parseAuthenticationResults('mx.example.com 1; none'), {
      authservId: 'mx.example.com',
      version: '1',
      results: [],
    });
    const field = parseAuthenticationResults(
      '"mx.example.com" (the MX (ours); really) ; dkim/1 = PASS (a (nested; = comment) with \\) escaped) ' +
        'header.d="quoted; value=x" ; Dmarc=Fail reason="p=reject; no alignment"',
    );
    assert.equal(field.authservId, 'mx.example.com');
    assert.deepEqual(field.results, [
      { method: 'dkim', version: '1', result: 'pass', properties: { 'header.d': 'quoted; value=x' } },
      { method: 'dmarc', result: 'fail', reason: 'p=reject; no alignment', properties: {} },
    ]);
  });

  it('never throws on malformed values, and leaves out what it cannot read', () => {
    const hostile = [
      '',
      ';;;',
      '=',
      '(unterminated comment; spf=pass',
      '"unterminated quoted string; spf=pass',
      'mx.example.com; =pass; spf=; dkim; dmarc pass; spf=pass',
      'mx.example.com; \\; (\\',
      'mx.example.com;' + ' dkim=pass header.d=x'.repeat(5000),
      '('.repeat(10_000),
      randomBytes(4096).toString('latin1'),
    ];
    for (const value of hostile) {
      const field = parseAuthenticationResults(value);
      assert.ok(Array.isArray(field.results));
    }
    assert.deepEqual(parseAuthenticationResults('mx.example.com; =pass; spf=; dkim; dmarc pass; spf=pass').results, [
      { method: 'spf', result: 'pass', properties: {} },
    ]);
    assert.equal(parseAuthenticationResults('(unterminated comment; spf=pass').authservId, undefined);
  });
});

describe('trustedProviderOutcomes', () => {
  it('maps the trusted provider’s results onto the outcomes of our own checks', () => {
    const outcomes = trustedProviderOutcomes([GOOGLE], ['mx.google.com']);
    assert.deepEqual(outcomes, { spf: 'pass', dkim: ['pass'], arc: 'none', dmarc: 'pass' });
    assert.deepEqual(senderVerdict(outcomes), {
      authentication: { spf: 'pass', dkim: 'pass', dmarc: 'pass', arc: 'none' },
      fromVerified: true,
    });
  });

  it('reads a DMARC failure as not verified, and passes result words through senderVerdict as ours are', () => {
    const outcomes = trustedProviderOutcomes([FASTMAIL], ['mx6.messagingengine.com']);
    assert.deepEqual(outcomes, { spf: 'softfail', dkim: ['pass'], arc: 'none', dmarc: 'fail' });
    assert.equal(senderVerdict(outcomes).fromVerified, false);

    const words = trustedProviderOutcomes(
      ['mx.example.com; spf=hardfail; dkim=policy; dkim=temperror; dmarc=bestguesspass; arc=PASS'],
      ['mx.example.com'],
    );
    assert.deepEqual(senderVerdict(words!), {
      authentication: { spf: 'fail', dkim: 'temperror', dmarc: 'neutral', arc: 'pass' },
      fromVerified: false,
    });
  });

  it('counts a message as DKIM-verified when any of its signatures passed', () => {
    const outcomes = trustedProviderOutcomes(
      ['mx.example.com; dkim=fail header.d=a.example; dkim=pass header.d=b.example'],
      ['mx.example.com'],
    );
    assert.deepEqual(outcomes?.dkim, ['fail', 'pass']);
    assert.equal(senderVerdict(outcomes).authentication.dkim, 'pass');
  });

  it('answers `none` for every check when the provider checked nothing', () => {
    assert.deepEqual(trustedProviderOutcomes(['mx.example.com 1; none'], ['mx.example.com']), {
      spf: undefined,
      dkim: [],
      arc: 'none',
      dmarc: 'none',
    });
  });

  it('matches authserv-ids case-insensitively', () => {
    assert.equal(trustedProviderOutcomes([GOOGLE], [' MX.Google.COM '])?.dmarc, 'pass');
    assert.equal(
      trustedProviderOutcomes([GOOGLE.replace('mx.google.com', 'MX.GOOGLE.COM')], ['mx.google.com'])?.dmarc,
      'pass',
    );
  });

  it('ignores fields of ids that are not trusted, and trusts nothing without trusted ids', () => {
    const forgedElsewhere = 'mx.attacker.example; spf=pass; dkim=pass; dmarc=pass';
    assert.equal(trustedProviderOutcomes([forgedElsewhere, GOOGLE], ['mx.example.com']), undefined);
    assert.equal(trustedProviderOutcomes([GOOGLE], []), undefined);
    assert.equal(trustedProviderOutcomes([], ['mx.google.com']), undefined);
    // A relay's field above the provider's is skipped, not taken for the provider's.
    assert.equal(trustedProviderOutcomes([forgedElsewhere, FASTMAIL], ['mx6.messagingengine.com'])?.dmarc, 'fail');
  });

  it('takes only the topmost field of a trusted id: a sender can forge lower ones', () => {
    const providers =
      'mx.example.com; spf=fail smtp.mailfrom=ceo@bank.example; dkim=none; dmarc=fail header.from=bank.example';
    const forged = 'mx.example.com; spf=pass; dkim=pass header.d=bank.example; dmarc=pass header.from=bank.example';
    const outcomes = trustedProviderOutcomes([providers, forged, forged], ['mx.example.com']);
    assert.deepEqual(outcomes, { spf: 'fail', dkim: ['none'], arc: 'none', dmarc: 'fail' });
    assert.equal(senderVerdict(outcomes).fromVerified, false);
  });

  it('never matches a field without an authserv-id (Microsoft 365 writes none)', () => {
    assert.equal(trustedProviderOutcomes([MICROSOFT], ['spf=pass', '', 'outlook.com']), undefined);
  });

  it('does not throw on malformed fields, and a malformed trusted field yields no passing check', () => {
    assert.equal(trustedProviderOutcomes(['', ';', '(((', '"'], ['mx.example.com']), undefined);
    assert.deepEqual(trustedProviderOutcomes(['mx.example.com; dmarc pass (; spf=pass'], ['mx.example.com']), {
      spf: undefined,
      dkim: [],
      arc: 'none',
      dmarc: 'none',
    });
  });
});

describe('authenticationResultsHeaders', () => {
  it('returns the unfolded Authentication-Results values of the header block, top to bottom', () => {
    const raw = [
      'Authentication-Results: mx.google.com;',
      '       dkim=pass header.i=@example.com;',
      '\tspf=pass smtp.mailfrom=alice@example.com',
      'Received: from mail.example.com',
      'authentication-results: mx.attacker.example; dmarc=pass',
      'Subject: Authentication-Results: not a field',
      '',
      'Authentication-Results: in the body; dmarc=pass',
    ].join('\r\n');
    assert.deepEqual(authenticationResultsHeaders(raw), [
      'mx.google.com;       dkim=pass header.i=@example.com;\tspf=pass smtp.mailfrom=alice@example.com',
      'mx.attacker.example; dmarc=pass',
    ]);
    assert.deepEqual(
      authenticationResultsHeaders(Buffer.from(raw.replaceAll('\r\n', '\n'))),
      authenticationResultsHeaders(raw),
    );
    assert.deepEqual(authenticationResultsHeaders('Subject: none\r\n\r\nbody'), []);
  });

  it('feeds trustedProviderOutcomes', () => {
    const raw = `Authentication-Results: ${GOOGLE}\r\nAuthentication-Results: mx.google.com; dmarc=fail\r\n\r\nbody`;
    assert.equal(trustedProviderOutcomes(authenticationResultsHeaders(raw), ['mx.google.com'])?.dmarc, 'pass');
  });
});
