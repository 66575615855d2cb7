import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  canonicalJson,
  DEFAULT_TTL_MS,
  grantedExpiry,
  isSubscriptionSecret,
  MAX_TTL_MS,
  MIN_TTL_MS,
  subscriptionId,
} from '#app/event-subscriptions/subscription-terms.js';
import { failureCategory } from '#app/webhooks/webhook-http.js';

/** docs/agents.md, "Webhook delivery": the terms of an Events-extension webhook subscription. */
describe('Events-extension subscription terms', () => {
  const now = new Date('2026-12-05T10:00:00Z');

  it('grants the suggested lifetime between a minute and a week, an hour when none is suggested, and no expiry for null', () => {
    assert.equal(grantedExpiry(undefined, now)!.getTime() - now.getTime(), DEFAULT_TTL_MS);
    assert.equal(grantedExpiry(600_000, now)!.getTime() - now.getTime(), 600_000);
    assert.equal(grantedExpiry(1, now)!.getTime() - now.getTime(), MIN_TTL_MS);
    assert.equal(grantedExpiry(0, now)!.getTime() - now.getTime(), MIN_TTL_MS);
    assert.equal(grantedExpiry(365 * 24 * 3600_000, now)!.getTime() - now.getTime(), MAX_TTL_MS);
    assert.equal(grantedExpiry(null, now), null);
  });

  it('takes only whsec_ secrets of 24 to 64 bytes', () => {
    for (const n of [24, 32, 64])
      assert.ok(isSubscriptionSecret(`whsec_${randomBytes(n).toString('base64')}`), `${n} bytes`);
    for (const n of [0, 16, 23, 65])
      assert.ok(!isSubscriptionSecret(`whsec_${randomBytes(n).toString('base64')}`), `${n} bytes`);
    assert.ok(!isSubscriptionSecret(randomBytes(32).toString('base64')), 'no prefix');
    assert.ok(!isSubscriptionSecret(`whsec_${randomBytes(32).toString('base64url')}_`), 'not base64');
    assert.ok(!isSubscriptionSecret(`whsec_${randomBytes(32).toString('base64').slice(1)}`), 'truncated base64');
    assert.ok(!isSubscriptionSecret(`whsec_${randomBytes(32).toString('base64')} `), 'trailing space');
  });

  it('derives one id per key: equal arguments in any key order, and a different id for any other part', () => {
    const id = subscriptionId('tok_a', 'https://hooks.example/x', 'email.received', {
      from: 'a@b',
      mailbox_id: 'mbx_1',
    });
    assert.match(id, /^sub_[0-9a-f]{24}$/);
    assert.equal(
      subscriptionId('tok_a', 'https://hooks.example/x', 'email.received', { mailbox_id: 'mbx_1', from: 'a@b' }),
      id,
    );
    assert.notEqual(
      subscriptionId('tok_b', 'https://hooks.example/x', 'email.received', { from: 'a@b', mailbox_id: 'mbx_1' }),
      id,
    );
    assert.notEqual(
      subscriptionId('tok_a', 'https://hooks.example/y', 'email.received', { from: 'a@b', mailbox_id: 'mbx_1' }),
      id,
    );
    assert.notEqual(
      subscriptionId('tok_a', 'https://hooks.example/x', 'approval.decided', { from: 'a@b', mailbox_id: 'mbx_1' }),
      id,
    );
    assert.notEqual(subscriptionId('tok_a', 'https://hooks.example/x', 'email.received', { from: 'a@b' }), id);
  });

  it('writes canonical JSON: sorted keys at every level, arrays in order, undefined left out', () => {
    assert.equal(canonicalJson({ b: [2, { d: 1, c: 0 }], a: 'x', u: undefined }), '{"a":"x","b":[2,{"c":0,"d":1}]}');
  });

  it('names what went wrong by category only', () => {
    assert.equal(failureCategory({ status: 404, error: 'HTTP 404' }), 'http_4xx');
    assert.equal(failureCategory({ status: 503, error: 'HTTP 503' }), 'http_5xx');
    assert.equal(failureCategory({ status: null, error: 'connect ECONNREFUSED 127.0.0.1:9' }), 'connection_refused');
    assert.equal(failureCategory({ status: null, error: 'no complete answer within 10000 ms' }), 'timeout');
    assert.equal(failureCategory({ status: null, error: 'self-signed certificate' }), 'tls_error');
    assert.equal(failureCategory({ status: null, error: 'unable to verify the first certificate' }), 'tls_error');
  });
});
