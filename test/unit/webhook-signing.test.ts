import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { isWebhookEventType, newWebhookSecret, signedHeaders } from '#app/webhooks/webhook-events.js';

/** docs/webhooks.md, "Signatures": what the standardwebhooks library makes of Alcarta's headers. */
describe('webhook signing', () => {
  const body = JSON.stringify({ type: 'message_received', cursor: '42' });

  it('a new secret is whsec_ and the base64 of 24 random bytes, and each is different', () => {
    const secret = newWebhookSecret();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.equal(Buffer.from(secret.slice('whsec_'.length), 'base64').length, 24);
    assert.notEqual(newWebhookSecret(), secret);
  });

  it('the headers verify with the library, and a changed body or id does not', () => {
    const secret = newWebhookSecret();
    const headers = signedHeaders('whd_1', body, [secret], new Date());
    assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body));
    assert.throws(() => new Webhook(secret).verify(body.replace('42', '43'), headers));
    assert.throws(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'whd_2' }));
    assert.throws(() => new Webhook(newWebhookSecret()).verify(body, headers));
  });

  it('with two secrets, both signatures are sent and either secret verifies', () => {
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()];
    const headers = signedHeaders('whd_1', body, [current, previous], new Date());
    assert.equal(headers['webhook-signature'].split(' ').length, 2);
    for (const secret of [current, previous]) assert.ok(new Webhook(secret).verify(body, headers));
  });

  it('the timestamp is in whole seconds', () => {
    const headers = signedHeaders('whd_1', body, [newWebhookSecret()], new Date('2026-12-04T10:00:00.999Z'));
    assert.equal(headers['webhook-timestamp'], String(Date.parse('2026-12-04T10:00:00Z') / 1000));
  });

  it('knows the deliverable event types only', () => {
    assert.ok(isWebhookEventType('message_received'));
    assert.ok(!isWebhookEventType('message_sent'));
    assert.ok(!isWebhookEventType('webhook_disabled'));
  });
});
