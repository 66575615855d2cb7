import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseReplyDecision, REASON_MAX_CHARS } from '#app/approval-mail/reply-decision.js';

const APPROVAL_MAIL = ['An agent of releases@example.com asks for your decision.', '', 'Request: Ship release 4.2'];

describe('parseReplyDecision: the first word of a reply to an approval mail', () => {
  it('the first word decides; the lines after it are the reason; "> " quotes are not read', () => {
    assert.deepEqual(
      parseReplyDecision(['Approve', '', 'Looks fine', '', ...APPROVAL_MAIL.map((l) => `> ${l}`)].join('\n')),
      {
        decision: 'approved',
        reason: 'Looks fine',
      },
    );
  });

  it('any case, with punctuation, "approved"/"rejected", and a reason on the same line', () => {
    const cases: Array<[string, 'approved' | 'rejected', string | null]> = [
      ['approve', 'approved', null],
      ['APPROVE', 'approved', null],
      ['Approve.', 'approved', null],
      ['Approved!', 'approved', null],
      ['*Approve*', 'approved', null],
      ['approved, ship it', 'approved', 'ship it'],
      ['Reject: wrong recipient', 'rejected', 'wrong recipient'],
      ['rejected - not before Monday', 'rejected', 'not before Monday'],
      ['Reject because the list is wrong', 'rejected', 'because the list is wrong'],
    ];
    for (const [text, decision, reason] of cases) {
      assert.deepEqual(parseReplyDecision(text), { decision, reason }, text);
    }
  });

  it('leading blank lines and CRLF line ends are skipped', () => {
    assert.deepEqual(parseReplyDecision('\r\n\r\n   \r\n  Reject\r\nNot this week\r\n'), {
      decision: 'rejected',
      reason: 'Not this week',
    });
  });

  it('an "On … wrote:" quote is not part of the reason', () => {
    const text = [
      'approve',
      'ok for me',
      '',
      'On Fri, Dec 4, 2026 at 10:00 AM Releases <releases@example.com> wrote:',
      ...APPROVAL_MAIL.map((l) => `> ${l}`),
    ].join('\n');
    assert.deepEqual(parseReplyDecision(text), { decision: 'approved', reason: 'ok for me' });
  });

  it('an Outlook "From: … Sent: …" block and what follows it are not read', () => {
    const text = [
      'Reject',
      '',
      'From: Releases <releases@example.com>',
      'Sent: Friday, December 4, 2026 10:00 AM',
      'To: Alice <alice@approvers.example>',
      'Subject: Approval needed: Ship release 4.2',
      '',
      ...APPROVAL_MAIL,
    ].join('\n');
    assert.deepEqual(parseReplyDecision(text), { decision: 'rejected', reason: null });
  });

  it('a "-- " signature and "Sent from my" lines are not part of the reason', () => {
    assert.deepEqual(parseReplyDecision('Approve\nfine by me\n\n-- \nAlice Example\nHead of releases'), {
      decision: 'approved',
      reason: 'fine by me',
    });
    assert.deepEqual(parseReplyDecision('Approved\n\nSent from my iPhone'), { decision: 'approved', reason: null });
  });

  it('a reply written below the quote is read below it', () => {
    assert.deepEqual(parseReplyDecision(['> Request: Ship release 4.2', '', 'reject', 'too risky'].join('\n')), {
      decision: 'rejected',
      reason: 'too risky',
    });
  });

  it('anything else is unclear, naming the word it found', () => {
    assert.deepEqual(parseReplyDecision('Yes please'), { decision: null, firstWord: 'Yes' });
    assert.deepEqual(parseReplyDecision('I approve'), { decision: null, firstWord: 'I' });
    assert.deepEqual(parseReplyDecision('approvedd'), { decision: null, firstWord: 'approvedd' });
    assert.deepEqual(parseReplyDecision(''), { decision: null, firstWord: null });
    assert.deepEqual(parseReplyDecision('\n\n> Approve\n'), { decision: null, firstWord: null });
    assert.deepEqual(parseReplyDecision('!!!'), { decision: null, firstWord: null });
  });

  it('the reason is cut to what the API accepts, and a huge reply is read only at its start', () => {
    const long = parseReplyDecision(`approve ${'x'.repeat(5000)}`);
    assert.equal(long.decision, 'approved');
    assert.equal('reason' in long && long.reason?.length, REASON_MAX_CHARS);
    const huge = `reject\n${'a line of text\n'.repeat(200_000)}`;
    const started = process.hrtime.bigint();
    assert.equal(parseReplyDecision(huge).decision, 'rejected');
    assert.ok(process.hrtime.bigint() - started < 2_000_000_000n, 'bounded time');
  });
});
