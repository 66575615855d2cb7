import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mailboxAddressOf } from '#app/mail/mailbox-address.js';

describe('mailboxAddressOf: the mailbox an SMTP recipient delivers to', () => {
  it('compares case-insensitively', () => {
    assert.equal(mailboxAddressOf('Agent@Example.COM'), 'agent@example.com');
    assert.equal(mailboxAddressOf('  agent@example.com '), 'agent@example.com');
  });

  it('delivers local+tag@domain to local@domain', () => {
    assert.equal(mailboxAddressOf('agent+invoices@example.com'), 'agent@example.com');
    assert.equal(mailboxAddressOf('Agent+A+B@example.com'), 'agent@example.com');
    assert.equal(mailboxAddressOf('agent+@example.com'), 'agent@example.com');
  });

  it('names no mailbox without a local part, a domain, or with only a tag', () => {
    for (const recipient of ['', 'agent', 'agent@', '@example.com', '+tag@example.com', '"quoted"@example.com']) {
      assert.equal(mailboxAddressOf(recipient), undefined, recipient);
    }
  });

  it('splits at the last @', () => {
    assert.equal(mailboxAddressOf('odd@name@example.com'), 'odd@name@example.com');
  });
});
