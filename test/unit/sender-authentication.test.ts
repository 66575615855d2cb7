import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppConfig } from '#app/config/app-config.js';
import { authenticationResult, dkimResult, senderVerdict } from '#app/mail/authentication-results.js';
import { BoundedDnsResolver } from '#app/mail/bounded-dns-resolver.js';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  HeaderLineLimit,
  MAX_CHECKED_HEADER_LINES,
  SenderAuthenticator,
  TooManyHeaderLines,
} from '#app/mail/sender-authenticator.js';
import { dnsZone, failingResolver, hangingResolver } from '../support/dns-zone';

describe('sender authentication: result mapping', () => {
  it('keeps the seven documented values and maps the others of mailauth', () => {
    for (const value of ['pass', 'fail', 'softfail', 'neutral', 'none', 'temperror', 'permerror'] as const) {
      assert.equal(authenticationResult(value), value);
    }
    assert.equal(authenticationResult('policy'), 'permerror');
    assert.equal(authenticationResult('temperr'), 'temperror');
    assert.equal(authenticationResult('skipped'), 'none');
    assert.equal(authenticationResult(undefined), 'none');
    assert.equal(authenticationResult('something-new'), 'neutral');
  });

  it('DKIM: pass when any signature passes, else the most telling failure, none when unsigned', () => {
    assert.equal(dkimResult(['fail', 'pass', 'temperror']), 'pass');
    assert.equal(dkimResult(['fail', 'temperror']), 'temperror');
    assert.equal(dkimResult(['neutral', 'fail']), 'fail');
    assert.equal(dkimResult(['neutral', 'policy']), 'permerror');
    assert.equal(dkimResult(['neutral']), 'neutral');
    assert.equal(dkimResult(['none']), 'none');
    assert.equal(dkimResult([]), 'none');
  });

  it('from_verified is DMARC pass and nothing else', () => {
    assert.deepEqual(senderVerdict({ spf: 'pass', dkim: ['pass'], arc: 'pass', dmarc: 'fail' }), {
      authentication: { spf: 'pass', dkim: 'pass', dmarc: 'fail', arc: 'pass' },
      fromVerified: false,
    });
    assert.deepEqual(senderVerdict({ dkim: ['none'], arc: 'none', dmarc: 'pass' }), {
      authentication: { spf: 'none', dkim: 'none', dmarc: 'pass', arc: 'none' },
      fromVerified: true,
    });
    assert.equal(senderVerdict({ dkim: ['pass'], arc: 'none', dmarc: 'temperror' }).fromVerified, false);
  });
});

describe('sender authentication: header blocks too long to check', () => {
  const message = (headerLines: number, eol = '\r\n') =>
    Buffer.from(
      ['Subject: x', ...Array.from({ length: headerLines - 1 }, (_, i) => ` <id-${i}@x>`), '', 'body'].join(eol),
    );

  /** Whether HeaderLineLimit stops `raw` fed in chunks of `chunkSize` bytes (every line break split somewhere). */
  const exceeds = async (raw: Buffer, limit = MAX_CHECKED_HEADER_LINES, chunkSize = 7) => {
    const chunks = Array.from({ length: Math.ceil(raw.length / chunkSize) }, (_, i) =>
      raw.subarray(i * chunkSize, (i + 1) * chunkSize),
    );
    const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
    try {
      await pipeline(Readable.from(chunks), new HeaderLineLimit(limit), sink);
      return false;
    } catch (err) {
      if (err instanceof TooManyHeaderLines) return true;
      throw err;
    }
  };

  it('counts the lines of the header block only, with CRLF or LF endings, however the message is cut', async () => {
    assert.equal(await exceeds(message(MAX_CHECKED_HEADER_LINES)), false);
    assert.equal(await exceeds(message(MAX_CHECKED_HEADER_LINES + 1)), true);
    assert.equal(await exceeds(message(MAX_CHECKED_HEADER_LINES + 1, '\n')), true);
    const longBody = Buffer.from(`Subject: x\r\n\r\n${'line\r\n'.repeat(MAX_CHECKED_HEADER_LINES * 2)}`);
    assert.equal(await exceeds(longBody), false);
    for (const size of [1, 2, 3, 64 * 1024]) {
      assert.equal(await exceeds(Buffer.from('A: 1\r\nB: 2\r\n\r\nC: 3\r\nD: 4\r\n'), 2, size), false);
      assert.equal(await exceeds(Buffer.from('A: 1\r\nB: 2\r\nC: 3\r\n\r\nbody'), 2, size), true);
      assert.equal(await exceeds(Buffer.from('\r\nA: 1\r\nB: 2\r\nC: 3\r\n'), 2, size), false);
    }
  });

  it('a header block of 70,000 folded lines is permerror at once, without asking DNS', async () => {
    const dns = failingResolver();
    const config = { mailAuthentication: true, smtpHostname: 'mx.alcarta.test' } as AppConfig;
    const authenticator = new SenderAuthenticator(config, dns);
    // mailauth is loaded at the first check (about a second of CPU): not what is measured here.
    await authenticator.verify(message(1));
    dns.lookups.length = 0;
    const started = Date.now();
    const verdict = await authenticator.verify(message(70_000));
    // Checked, this block held the event loop for 30 s; refused unread, it takes milliseconds. The
    // bound leaves room for a busy machine and still tells the two apart.
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
    assert.deepEqual(verdict.authentication, { spf: 'none', dkim: 'permerror', dmarc: 'permerror', arc: 'permerror' });
    assert.equal(verdict.fromVerified, false);
    assert.equal(dns.lookups.length, 0);
  });
});

describe('sender authentication: bounded DNS', () => {
  it('a lookup that never answers fails with ETIMEOUT after the lookup limit, and counts as a failure', async () => {
    const bounded = new BoundedDnsResolver(hangingResolver(), { lookupMs: 50, totalMs: 10_000 });
    const started = Date.now();
    await assert.rejects(bounded.resolve('_dmarc.example.org', 'TXT'), { code: 'ETIMEOUT' });
    assert.ok(Date.now() - started < 5000);
    assert.equal(bounded.failures, 1);
  });

  it('past the total limit every lookup fails at once', async () => {
    const zone = dnsZone({ 'example.org': { TXT: ['v=spf1 -all'] } });
    const bounded = new BoundedDnsResolver(zone, { lookupMs: 50, totalMs: 0 });
    await assert.rejects(bounded.resolve('example.org', 'TXT'), { code: 'ETIMEOUT' });
    assert.equal(zone.lookups.length, 0);
  });

  it('answers pass through; "no such record" is an answer, not a failure', async () => {
    const bounded = new BoundedDnsResolver(dnsZone({ 'example.org': { TXT: ['v=spf1 -all'] } }));
    assert.deepEqual(await bounded.resolve('EXAMPLE.org.', 'TXT'), [['v=spf1 -all']]);
    await assert.rejects(bounded.resolve('example.org', 'A'), { code: 'ENODATA' });
    await assert.rejects(bounded.resolve('missing.example.org', 'TXT'), { code: 'ENOTFOUND' });
    assert.equal(bounded.failures, 0);
    const broken = new BoundedDnsResolver(failingResolver());
    await assert.rejects(broken.resolve('example.org', 'TXT'), { code: 'ESERVFAIL' });
    assert.equal(broken.failures, 1);
  });
});

/**
 * SPF needs an SMTP session (client address, HELO, MAIL FROM). Until the SMTP server's end-to-end
 * tests exist, this checks the mapping of real mailauth SPF answers through the service, with DNS
 * answers from a record table.
 */
describe('sender authentication: SPF through SenderAuthenticator', () => {
  const config = { mailAuthentication: true, smtpHostname: 'mx.alcarta.test' } as AppConfig;
  const zone = dnsZone({
    'agents.example': { TXT: ['v=spf1 ip4:192.0.2.10 -all'] },
    'soft.example': { TXT: ['v=spf1 ip4:192.0.2.10 ~all'] },
    'open.example': { TXT: ['v=spf1 ?all'] },
    'broken.example': { TXT: ['v=spf1 ip4:192.0.2.10 bogus:x -all'] },
    '_dmarc.agents.example': { TXT: ['v=DMARC1; p=reject'] },
  });
  const authenticator = new SenderAuthenticator(config, zone);
  const unsigned = (from: string) =>
    Buffer.from(`From: ${from}\r\nTo: agent@alcarta.test\r\nSubject: hi\r\nMessage-ID: <1@x>\r\n\r\nhello\r\n`);
  const smtp = (ip: string, mailFrom: string) => ({ ip, helo: 'mail.agents.example', mailFrom });

  it('an authorised client passes SPF, and SPF alone aligns DMARC (from_verified)', async () => {
    const verdict = await authenticator.verify(
      unsigned('bot@agents.example'),
      smtp('192.0.2.10', 'bot@agents.example'),
    );
    assert.deepEqual(verdict, {
      authentication: { spf: 'pass', dkim: 'none', dmarc: 'pass', arc: 'none' },
      fromVerified: true,
    });
  });

  it('fail, softfail, neutral, none and permerror come through as such', async () => {
    const spfOf = async (ip: string, mailFrom: string) =>
      (await authenticator.verify(unsigned('bot@agents.example'), smtp(ip, mailFrom))).authentication.spf;
    assert.equal(await spfOf('198.51.100.7', 'bot@agents.example'), 'fail');
    assert.equal(await spfOf('198.51.100.7', 'bot@soft.example'), 'softfail');
    assert.equal(await spfOf('198.51.100.7', 'bot@open.example'), 'neutral');
    assert.equal(await spfOf('198.51.100.7', 'bot@nowhere.example'), 'none');
    assert.equal(await spfOf('198.51.100.7', 'bot@broken.example'), 'permerror');
    const failed = await authenticator.verify(
      unsigned('bot@agents.example'),
      smtp('198.51.100.7', 'bot@agents.example'),
    );
    assert.deepEqual(failed.authentication.dmarc, 'fail');
    assert.equal(failed.fromVerified, false);
  });

  it('DNS trouble is temperror; without an SMTP context SPF is none and not looked up', async () => {
    const broken = new SenderAuthenticator(config, failingResolver());
    const verdict = await broken.verify(unsigned('bot@agents.example'), smtp('192.0.2.10', 'bot@agents.example'));
    assert.equal(verdict.authentication.spf, 'temperror');
    assert.equal(verdict.authentication.dmarc, 'temperror');
    const counting = dnsZone();
    const rest = await new SenderAuthenticator(config, counting).verify(unsigned('bot@agents.example'));
    assert.equal(rest.authentication.spf, 'none');
    assert.deepEqual(counting.lookups, [{ name: '_dmarc.agents.example', rrtype: 'TXT' }]);
  });
});
