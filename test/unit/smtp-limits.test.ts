import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { fanOut } from '#app/common/stream-fan-out.js';
import { HeaderBlockBounder, withBoundedHeaderBlock } from '#app/mail/rfc822-header-block.js';
import { ByteBudget, FinishingGate } from '#app/smtp/byte-budget.js';
import { clientOf, delayFor, GuessThrottle } from '#app/smtp/guess-throttle.js';

describe('SMTP guess throttle', () => {
  const clock = () => {
    let now = 1_000_000;
    return { now: () => now, pass: (ms: number) => (now += ms) };
  };

  it('slows a client once it used up a session of guesses, more with each, then forgets', () => {
    const time = clock();
    const throttle = new GuessThrottle(time.now);
    /** The delay of a new session of `client`, which then ends. */
    const delay = (client: string) => {
      const admission = throttle.admit(client);
      throttle.closed(client);
      return 'delayMs' in admission ? admission.delayMs : 'refused';
    };
    assert.equal(delay('192.0.2.1'), 0);
    for (let i = 0; i < 4; i++) throttle.offence('192.0.2.1', 'failed_auth');
    assert.equal(delay('192.0.2.1'), 0, 'four failed AUTHs are not enough');
    throttle.offence('192.0.2.1', 'failed_auth');
    throttle.offence('192.0.2.1', 'closed');
    assert.equal(delay('192.0.2.1'), 2000);
    assert.equal(delay('192.0.2.2'), 0, 'other clients are not slowed');
    for (let i = 0; i < 20; i++) throttle.offence('192.0.2.1', 'unknown_recipient');
    throttle.offence('192.0.2.1', 'closed');
    assert.equal(delay('192.0.2.1'), 8000);
    time.pass(10 * 60_000);
    assert.equal(delay('192.0.2.1'), 2000, 'the score halves in ten minutes');
    time.pass(60 * 60_000);
    assert.equal(delay('192.0.2.1'), 0);
    assert.equal(throttle.remembered, 0);
  });

  it('caps the delay, and lets a slowed client hold two sessions at once', () => {
    const throttle = new GuessThrottle();
    assert.equal(delayFor(0.9), 0);
    assert.equal(delayFor(1), 1000);
    assert.equal(delayFor(50), 30_000);
    for (let i = 0; i < 3; i++) throttle.offence('198.51.100.7', 'closed');
    assert.ok('delayMs' in throttle.admit('198.51.100.7'));
    assert.ok('delayMs' in throttle.admit('198.51.100.7'));
    assert.deepEqual(throttle.admit('198.51.100.7'), { refused: true });
    throttle.closed('198.51.100.7');
    assert.ok('delayMs' in throttle.admit('198.51.100.7'));
  });

  it('remembers at most 10,000 clients, and an IPv6 client is its /64', () => {
    const throttle = new GuessThrottle();
    for (let i = 0; i < 12_000; i++) throttle.offence(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, 'closed');
    assert.equal(throttle.remembered, 10_000);
    assert.equal(clientOf('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
    assert.equal(clientOf('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(clientOf('::1'), '0:0:0:0::/64');
    assert.equal(clientOf('192.0.2.1'), '192.0.2.1');
    throttle.offence('2001:db8:1:2::1', 'closed');
    throttle.offence('2001:db8:1:2:ffff::9', 'closed');
    assert.deepEqual(throttle.admit('2001:db8:1:2::77'), { delayMs: 2000 });
  });
});

describe('SMTP bytes in flight', () => {
  it('takes bytes only while they fit, and gives them back', () => {
    const budget = new ByteBudget(100);
    assert.ok(budget.tryTake(60));
    assert.equal(budget.tryTake(41), false);
    assert.ok(budget.fits(40));
    assert.ok(budget.tryTake(40));
    budget.give(100);
    assert.equal(budget.inFlight, 0);
  });

  it('lets messages finish in order, up to the capacity, always at least one', async () => {
    const gate = new FinishingGate(100);
    const order: string[] = [];
    const enter = (name: string, bytes: number) => gate.enter(bytes).then((leave) => (order.push(name), leave));
    const big = await enter('big', 150);
    const waiting = [enter('a', 60), enter('b', 30), enter('c', 30)];
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(order, ['big'], 'a message larger than the capacity goes alone');
    big();
    const [a, b] = await Promise.all(waiting.slice(0, 2));
    assert.deepEqual(order, ['big', 'a', 'b'], 'small ones go together, in order');
    a();
    b();
    (await waiting[2])();
  });
});

describe('streams of raw mail', () => {
  it('holds the header block back until its end however it is cut, and passes the body on', async () => {
    const huge = Array.from({ length: 20_000 }, (_, i) => `X-Filler-${i}: ${'v'.repeat(60)}`).join('\r\n');
    for (const message of [
      'From: a@example.org\r\nSubject: hi\r\n\r\nbody\r\n\r\nmore\r\n',
      'From: a@example.org\nSubject: hi\n\nbody\n',
      '\r\nno header\r\n',
      'From: a@example.org\r\nSubject: all header',
      `From: a@example.org\r\n${huge}\r\n\r\nbody after a huge header\r\n`,
    ]) {
      const raw = Buffer.from(message);
      for (const size of raw.length > 10_000 ? [7, 4096] : [1, 2, 3, 5, 4096]) {
        const chunks = Array.from({ length: Math.ceil(raw.length / size) }, (_, i) =>
          raw.subarray(i * size, (i + 1) * size),
        );
        const out: Buffer[] = [];
        for await (const chunk of Readable.from(chunks).pipe(new HeaderBlockBounder())) out.push(chunk as Buffer);
        assert.deepEqual(
          Buffer.concat(out),
          withBoundedHeaderBlock(raw),
          `${JSON.stringify(message.slice(0, 30))} in ${size}s`,
        );
      }
    }
  });

  it('feeds every reader at the pace of the slowest, and leaves a destroyed one out', async () => {
    const chunks = Array.from({ length: 200 }, (_, i) => Buffer.alloc(4096, i));
    const [fast, slow, quitter] = fanOut(Readable.from(chunks), 3);
    quitter.destroy();
    const read = async (reader: Readable, pauseEvery: number) => {
      let bytes = 0;
      let n = 0;
      for await (const chunk of reader) {
        bytes += (chunk as Buffer).length;
        if (++n % pauseEvery === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      }
      return bytes;
    };
    assert.deepEqual(await Promise.all([read(fast, 1000), read(slow, 10)]), [200 * 4096, 200 * 4096]);
  });
});
