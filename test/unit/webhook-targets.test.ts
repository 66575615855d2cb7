import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppConfig } from '#app/config/app-config.js';
import { validateEnvironment } from '#app/config/environment.js';
import { isWebhookAllowedHostEntry, webhookAllowedHostEntries } from '#app/config/webhook-allowed-hosts.js';
import { AlcartaError } from '#app/kernel/errors.js';
import { addressRefusal, assertWebhookUrl } from '#app/webhooks/webhook-http.js';

/** The addresses webhooks refuse, by the kind the refusal names (docs/webhooks.md, "Safe targets"). */
const REFUSED: Record<string, string[]> = {
  private: ['10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.0.1', '192.168.255.255'],
  'carrier-grade NAT': ['100.64.0.1', '100.127.255.254'],
  loopback: [
    '127.0.0.1',
    '127.0.1.1',
    '127.255.255.254',
    '::1',
    '0:0:0:0:0:0:0:1',
    '0000:0000:0000:0000:0000:0000:0000:0001',
    '::0:0:1',
    // IPv4-mapped: the IPv4 loopback reached through an IPv6 socket.
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '0:0:0:0:0:ffff:7f00:0001',
    '::FFFF:127.1.2.3',
  ],
  'link-local': ['169.254.0.1', '169.254.255.254', 'fe80::1', 'febf:ffff::1', '::ffff:169.254.1.1'],
  'unique-local': ['fc00::1', 'fd12:3456:789a::1', 'fdff:ffff::1'],
  unspecified: ['0.0.0.0', '0.1.2.3', '::', '0:0:0:0:0:0:0:0', '::ffff:0.0.0.0'],
  multicast: ['224.0.0.1', '239.255.255.250', 'ff02::1', 'ff0e::1'],
  broadcast: ['255.255.255.255'],
  'cloud metadata': ['169.254.169.254', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe', 'fd00:ec2::254'],
  // Reserved and documentation ranges, and the IPv6 forms that embed an IPv4 address other than
  // IPv4-mapped (IPv4-compatible, SIIT, NAT64, 6to4, Teredo): none is a public webhook target.
  reserved: [
    '240.0.0.1',
    '192.0.2.1',
    '198.18.0.1',
    '::127.0.0.1',
    '::10.0.0.1',
    '::ffff:0:127.0.0.1',
    '64:ff9b::7f00:1',
    '2002:7f00:1::1',
    '2001:0:4136:e378::1',
    '2001:db8::1',
    'fec0::1',
    '100::1',
  ],
};

const PUBLIC = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.215.14',
  '9.255.255.255',
  '11.0.0.1',
  '172.15.255.255',
  '172.32.0.1',
  '192.169.0.1',
  '100.63.255.255',
  '100.128.0.1',
  '169.253.255.255',
  '169.255.0.1',
  '126.255.255.255',
  '128.0.0.1',
  '::ffff:8.8.8.8',
  '2606:4700:4700::1111',
  '2a00:1450:4001:82b::200e',
];

function refusedAs(kind: string, address: string): void {
  const refusal = addressRefusal(address);
  assert.ok(refusal, `${address} must be refused as ${kind}`);
  if (kind !== 'reserved') assert.match(refusal, new RegExp(kind), `${address}: ${refusal}`);
}

function urlRefusal(url: string, allowedHosts: string[] = []): AlcartaError {
  try {
    assertWebhookUrl(url, allowedHosts);
  } catch (err) {
    assert.ok(err instanceof AlcartaError, String(err));
    return err;
  }
  assert.fail(`${url} must be refused`);
}

describe('webhook target addresses', () => {
  for (const [kind, addresses] of Object.entries(REFUSED)) {
    it(`refuses ${kind} addresses in every notation`, () => {
      for (const address of addresses) refusedAs(kind, address);
    });
  }

  it('allows public unicast addresses, including those next to the refused ranges', () => {
    for (const address of PUBLIC) assert.equal(addressRefusal(address), undefined, address);
  });

  it('refuses what is not an address', () => {
    for (const text of ['', 'localhost', '1.2.3', '::g', '127.0.0.1/8']) assert.ok(addressRefusal(text), text);
  });
});

describe('webhook URLs (assertWebhookUrl)', () => {
  it('accepts http and https URLs on host names and public addresses', () => {
    for (const url of [
      'https://hooks.example.com/alcarta',
      'http://hooks.example.com:8080/x?y=1',
      'https://8.8.8.8/',
      'https://[2606:4700:4700::1111]/',
    ]) {
      assert.doesNotThrow(() => assertWebhookUrl(url), url);
    }
  });

  it('refuses other schemes, credentials and malformed URLs with 400 invalid_url naming the field', () => {
    for (const url of [
      'ftp://hooks.example.com/',
      'file:///etc/passwd',
      'gopher://hooks.example.com/',
      'javascript:alert(1)',
      'http://user:pass@hooks.example.com/',
      'https://user@hooks.example.com/',
      'not a url',
      '/relative/path',
      'http://',
      'http://exa mple.com/',
    ]) {
      const err = urlRefusal(url);
      assert.equal(err.code, 'invalid_request', url);
      assert.equal(err.reason, 'invalid_url', url);
      assert.equal(err.details.field, 'url', url);
    }
    assert.match(urlRefusal('ftp://hooks.example.com/').message, /ftp:/);
    assert.match(urlRefusal('http://user:pass@hooks.example.com/').message, /credentials/);
  });

  it('refuses literal private addresses in every form WHATWG URL accepts, unless allowed', () => {
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://127.0.0.1:8080/',
      'http://127.1/',
      'http://2130706433/',
      'http://0x7f000001/',
      'http://0177.0.0.1/',
      'http://[::1]/',
      'http://[0:0:0:0:0:0:0:1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:169.254.169.254]/',
      'http://[fd00:ec2::254]/',
      'http://10.0.0.1/',
      'http://0.0.0.0/',
      'http://[::]/',
      'http://localhost:3000/',
      'http://api.localhost/',
    ]) {
      assert.equal(urlRefusal(url).reason, 'invalid_url', url);
    }
    assert.match(urlRefusal('http://169.254.169.254/').message, /metadata/);
    assert.match(urlRefusal('http://2130706433/').message, /127\.0\.0\.1 is a loopback address/);
    assert.doesNotThrow(() => assertWebhookUrl('http://127.1:9/', ['127.0.0.1']));
    assert.doesNotThrow(() => assertWebhookUrl('http://[::ffff:127.0.0.1]:9/', ['127.0.0.1']));
    assert.doesNotThrow(() => assertWebhookUrl('http://[::1]:9/', ['::1']));
    assert.doesNotThrow(() => assertWebhookUrl('http://localhost:9/', ['localhost']));
    assert.equal(urlRefusal('http://[::1]/', ['127.0.0.1']).reason, 'invalid_url', '::1 is not 127.0.0.1');
  });
});

describe('ALCARTA_WEBHOOK_ALLOWED_HOSTS', () => {
  it('reads comma-separated host names and addresses as they are compared', () => {
    assert.deepEqual(webhookAllowedHostEntries(' Hooks.Internal. , ,10.0.0.5,[FD00::1] '), [
      'hooks.internal',
      '10.0.0.5',
      'fd00::1',
    ]);
    assert.deepEqual(new AppConfig(validateEnvironment({})).webhookAllowedHosts, []);
    assert.deepEqual(
      new AppConfig(validateEnvironment({ ALCARTA_WEBHOOK_ALLOWED_HOSTS: 'receiver.svc, 127.0.0.1' }))
        .webhookAllowedHosts,
      ['receiver.svc', '127.0.0.1'],
    );
  });

  it('refuses ranges, ports and URLs at start', () => {
    for (const entry of ['hooks.internal', '10.0.0.5', 'fd00::1', 'localhost', 'a_b.svc']) {
      assert.ok(isWebhookAllowedHostEntry(entry), entry);
    }
    for (const entry of ['10.0.0.0/8', 'hooks.internal:8080', 'http://hooks.internal', '*.internal', 'a..b']) {
      assert.equal(isWebhookAllowedHostEntry(entry), false, entry);
    }
    assert.throws(
      () => validateEnvironment({ ALCARTA_WEBHOOK_ALLOWED_HOSTS: '10.0.0.0/8' }),
      /ALCARTA_WEBHOOK_ALLOWED_HOSTS must list host names or IP addresses/,
    );
  });
});
