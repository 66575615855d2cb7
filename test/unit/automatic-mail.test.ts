import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRfc822 } from '#app/mail/rfc822-parser.js';

const message = (...headers: string[]) =>
  Buffer.from(
    ['From: alice@approvers.example', 'To: releases@example.com', 'Subject: Re: x', ...headers, '', 'approve', ''].join(
      '\r\n',
    ),
  );

describe('parseRfc822: mail a machine sent (RFC 3834), which nothing answers automatically', () => {
  it('Auto-Submitted other than "no", and Precedence bulk, junk, list or auto_reply, are automatic', async () => {
    for (const header of [
      'Auto-Submitted: auto-replied',
      'Auto-Submitted: Auto-Generated',
      'Auto-Submitted: auto-replied; owner-email="x@example.org"',
      'Precedence: bulk',
      'Precedence: auto_reply',
      'Precedence: list',
    ]) {
      assert.equal((await parseRfc822(message(header))).automatic, true, header);
    }
  });

  it('a person’s mail, and "Auto-Submitted: no", are not', async () => {
    for (const headers of [[], ['Auto-Submitted: no'], ['Precedence: first-class']]) {
      assert.equal((await parseRfc822(message(...headers))).automatic, undefined, headers.join());
    }
  });
});
