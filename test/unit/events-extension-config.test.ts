import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppConfig } from '#app/config/app-config.js';
import { validateEnvironment } from '#app/config/environment.js';
import { AlcartaError } from '#app/kernel/errors.js';
import { DecisionCursor } from '#app/events/decision-cursor.js';

describe('ALCARTA_EVENTS_EXTENSION', () => {
  it('is on by default, and on or off as set', () => {
    assert.equal(new AppConfig(validateEnvironment({})).eventsExtension, true);
    assert.equal(new AppConfig(validateEnvironment({ ALCARTA_EVENTS_EXTENSION: 'on' })).eventsExtension, true);
    assert.equal(new AppConfig(validateEnvironment({ ALCARTA_EVENTS_EXTENSION: 'off' })).eventsExtension, false);
  });

  it('refuses anything else with a message naming the variable', () => {
    for (const value of ['yes', 'true', 'OFF', '']) {
      assert.throws(
        () => validateEnvironment({ ALCARTA_EVENTS_EXTENSION: value }),
        /ALCARTA_EVENTS_EXTENSION must/,
        value,
      );
    }
  });
});

describe('DecisionCursor', () => {
  const invalid = (text: string) =>
    assert.throws(
      () => DecisionCursor.parse(text),
      (err: unknown) => err instanceof AlcartaError && err.reason === 'invalid_cursor',
      text,
    );

  it('round-trips a position with a canonical encoding', () => {
    const cursor = DecisionCursor.at(123456789012n, 42n);
    const parsed = DecisionCursor.parse(cursor.toString());
    assert.equal(parsed.xact, 123456789012n);
    assert.equal(parsed.id, 42n);
    assert.equal(parsed.toString(), cursor.toString());
    assert.match(cursor.toString(), /^dc1\.[A-Za-z0-9_-]+$/);
  });

  it('orders positions by transaction, then row, and never moves back', () => {
    const a = DecisionCursor.at(10n, 5n);
    const b = DecisionCursor.at(10n, 7n);
    const horizon = DecisionCursor.before(11n);
    assert.equal(a.max(b), b);
    assert.equal(b.max(a), b);
    assert.equal(b.max(horizon), horizon);
    assert.equal(DecisionCursor.before(9n).max(a), a);
  });

  it('refuses what this server did not issue', () => {
    const encode = (body: string) => `dc1.${Buffer.from(body, 'latin1').toString('base64url')}`;
    for (const text of ['', 'dc1.', 'mc1.', 'dc1.!!', 'x'.repeat(100), encode('1'), encode('a:b'), encode('1:2:3')]) {
      invalid(text);
    }
    invalid(encode('9223372036854775808:1'));
    invalid(encode('1:9223372036854775808'));
    invalid(`${encode('1:2')}=`);
  });
});
