import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isTrustedProxyEntry, trustedProxyEntries } from '#app/config/trusted-proxies.js';
import { clientAddressKey } from '#app/http/client-address.js';

describe('client addresses of the console attempt limits', () => {
  it('keys IPv4 by address and IPv6 by its /64, whatever the notation', () => {
    assert.equal(clientAddressKey('192.0.2.7'), '192.0.2.7');
    assert.equal(clientAddressKey('::ffff:192.0.2.7'), '192.0.2.7', 'IPv4-mapped is the IPv4 client');
    assert.equal(clientAddressKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
    assert.equal(clientAddressKey('2001:DB8:1:2::9'), '2001:db8:1:2::/64');
    assert.equal(clientAddressKey('2001:0db8:0001:0002:ffff::1'), '2001:db8:1:2::/64', 'leading zeros');
    assert.equal(clientAddressKey('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(clientAddressKey('fe80::1%eth0'), 'fe80:0:0:0::/64', 'zone ids are dropped');
    assert.equal(clientAddressKey('::1'), '0:0:0:0::/64');
    assert.equal(clientAddressKey('64:ff9b::192.0.2.7'), '64:ff9b:0:0::/64');
    assert.equal(clientAddressKey(undefined), 'unknown');
  });

  it('accepts addresses, CIDR ranges and the named ranges as trusted proxies, and nothing else', () => {
    assert.deepEqual(trustedProxyEntries(' 10.0.0.0/8, ,uniquelocal,::1 '), ['10.0.0.0/8', 'uniquelocal', '::1']);
    assert.deepEqual(trustedProxyEntries(''), []);
    for (const entry of [
      '127.0.0.1',
      '10.0.0.0/8',
      '0.0.0.0/0',
      'fd00::/8',
      '::1/128',
      'loopback',
      'linklocal',
      'uniquelocal',
    ]) {
      assert.ok(isTrustedProxyEntry(entry), entry);
    }
    for (const entry of [
      'true',
      '1',
      'proxy.internal',
      '10.0.0.0/33',
      '::/129',
      '10.0.0.0/255.0.0.0',
      '10.0.0.0/8/1',
      '10.0.0/8',
      'all',
    ]) {
      assert.ok(!isTrustedProxyEntry(entry), entry);
    }
  });
});
