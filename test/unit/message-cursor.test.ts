import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AlcartaError } from '#app/kernel/errors.js';
import { MessageCursor } from '#app/mail/message-cursor.js';

function reasonOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof AlcartaError ? `${err.code}/${err.reason}` : 'other error';
  }
  return undefined;
}

describe('MessageCursor', () => {
  it('round-trips positions and treats absent mailboxes as position 0', () => {
    const cursor = MessageCursor.fromPositions([
      [3, 17],
      [1, 2],
    ]);
    const parsed = MessageCursor.parse(cursor.toString());
    assert.equal(parsed.position(3), 17);
    assert.equal(parsed.position(1), 2);
    assert.equal(parsed.position(99), 0);
    assert.equal(parsed.toString(), cursor.toString(), 'the encoding is canonical');
  });

  it('the start cursor is valid and empty', () => {
    assert.equal(MessageCursor.parse(MessageCursor.START.toString()).position(1), 0);
  });

  it('advances but never moves a position backwards, and keeps positions of other mailboxes', () => {
    const cursor = MessageCursor.fromPositions([
      [1, 10],
      [2, 5],
    ]).advancedTo([
      [1, 4],
      [2, 9],
      [7, 1],
    ]);
    assert.equal(cursor.position(1), 10);
    assert.equal(cursor.position(2), 9);
    assert.equal(cursor.position(7), 1);
  });

  it('rejects anything it did not issue with invalid_cursor', () => {
    const valid = MessageCursor.fromPositions([[1, 2]]).toString();
    for (const bad of [
      '',
      'garbage',
      'mc1.!!',
      'mc2.' + valid.slice(4),
      valid + 'x',
      'mc1.' + Buffer.from('1:2,1:3').toString('base64url'),
      'mc1.' + Buffer.from('1:-2').toString('base64url'),
      'mc1.' + Buffer.from('a:b').toString('base64url'),
      'mc1.' + 'A'.repeat(300_000),
    ]) {
      assert.equal(
        reasonOf(() => MessageCursor.parse(bad)),
        'invalid_request/invalid_cursor',
        `accepted ${bad.slice(0, 40)}`,
      );
    }
  });
});
